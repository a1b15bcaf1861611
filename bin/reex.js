#!/usr/bin/env node
// Runs the compiled CLI; `npm ci` builds dist/ through the `prepare` script.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const entry = fileURLToPath(new URL("../dist/src/cli.js", import.meta.url));
if (!existsSync(entry)) {
  console.error("reex: dist/ is missing; run `npm run build` (npm ci does it for you).");
  process.exit(1);
}
await import(entry);
