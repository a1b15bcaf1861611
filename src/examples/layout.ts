/** Which example databases there are and how a build lays them out on disk. */
import { join } from "node:path";
import { clinic } from "./clinic.js";
import { music } from "./music.js";
import { retail } from "./retail.js";
import type { ExampleDatabase } from "./types.js";

/** The example databases, in build and question-id order: retail, clinic, music. */
export const EXAMPLE_DATABASES: readonly ExampleDatabase[] = [retail, clinic, music];

/** File name of the marker that records the build key and each output's sha256. Default `.build-hash`. */
export const BUILD_MARKER = ".build-hash";

/** SQLite page size of every example file. Default 4096. */
export const PAGE_SIZE = 4096;

/** Path of one database inside an output root, BIRD style: `<outDir>/databases/<dbId>/<dbId>.sqlite`. */
export function exampleDbPath(outDir: string, dbId: string): string {
  return join(outDir, "databases", dbId, `${dbId}.sqlite`);
}
