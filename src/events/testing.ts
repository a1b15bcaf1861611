/**
 * Event shapes that only the tests name one by one. No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts.
 */
import type { ReexEvent } from "./index.js";

/** The rebind event (`type: "rebind"`) of the {@link ReexEvent} union. */
export type RebindEvent = Extract<ReexEvent, { type: "rebind" }>;
