/**
 * Stock SQLite's double-quoted string literals on reex's query connections. better-sqlite3 is
 * compiled with SQLITE_DQS=0, so `WHERE name = "Aruba"` fails there while stock SQLite (and the
 * gold SQL of Spider) reads it as a string when no column is named "Aruba". A tiny loadable
 * extension (scripts/sqlite-dqs/reex_dqs.c) flips SQLite's own per-connection switches,
 * SQLITE_DBCONFIG_DQS_DML and _DDL, so name resolution is SQLite's, unchanged.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type Database from "better-sqlite3";
import { ReexError } from "../errors/index.js";
import { packageRoot } from "../paths/index.js";

let extensionPath: string | undefined;
let buildFailure: ReexError | undefined;

/**
 * The compiled extension, built by `npm install` (scripts/build-sqlite-dqs.sh); when it is missing
 * the script is run here, once per process. Throws INTERNAL when it cannot be built (no C compiler).
 */
export function dqsExtensionPath(): string {
  if (extensionPath) return extensionPath;
  if (buildFailure) throw buildFailure;
  const root = packageRoot();
  const path = join(root, "node_modules", ".cache", "reex-sqlite", "reex_dqs.so");
  if (!existsSync(path)) {
    const script = join(root, "scripts", "build-sqlite-dqs.sh");
    try {
      execFileSync("bash", [script], { stdio: ["ignore", "ignore", "pipe"] });
    } catch (err) {
      const detail = String((err as { stderr?: unknown }).stderr ?? (err as Error).message).trim();
      buildFailure = new ReexError(
        "INTERNAL",
        `SQLite's double-quoted string extension is missing and could not be built (${detail}); run bash scripts/build-sqlite-dqs.sh with a C compiler`,
        { cause: err },
      );
      throw buildFailure;
    }
    if (!existsSync(path)) throw (buildFailure = new ReexError("INTERNAL", `SQLite's double-quoted string extension is missing: ${path}`));
  }
  extensionPath = path;
  return path;
}

/** Makes `db` read double-quoted words that name no column as strings, exactly as stock SQLite does. */
export function enableDoubleQuotedStrings(db: Database.Database): void {
  // SQLite derives the entry point from the file name: reex_dqs.so → sqlite3_reexdqs_init.
  db.loadExtension(dqsExtensionPath());
}

/**
 * Lowers SQLite's length limit (largest string or BLOB) on `db` to `bytes`, through the same
 * extension's one-shot `reex_limit_length`: later calls on the connection fail, so SQL cannot raise it.
 */
export function limitValueLength(db: Database.Database, bytes: number): void {
  db.prepare("SELECT reex_limit_length(?)")
    .pluck()
    .get(Math.max(1, Math.floor(bytes)));
}
