/** Read-only access to a user's database file, shared by schema introspection and the value index. */
import { realpathSync, statSync } from "node:fs";
import Database from "better-sqlite3";
import { ReexError } from "../errors/index.js";

/** Identity of a database file's current contents: canonical path, modification time and size. */
export interface DatabaseFingerprint {
  path: string;
  mtimeMs: number;
  size: number;
}

/** Fingerprints a database file; throws DB_FILE_NOT_FOUND when it is missing or not a regular file. */
export function fingerprintDatabase(dbPath: string): DatabaseFingerprint {
  let path: string;
  try {
    path = realpathSync(dbPath);
  } catch {
    throw new ReexError("DB_FILE_NOT_FOUND", `database file not found: ${dbPath}`);
  }
  const st = statSync(path);
  if (!st.isFile()) throw new ReexError("DB_FILE_NOT_FOUND", `not a regular file: ${dbPath}`);
  return { path, mtimeMs: st.mtimeMs, size: st.size };
}

/** Opens a database read-only (the file must exist); throws DB_INVALID when it is not SQLite. */
export function openReadOnly(dbPath: string): Database.Database {
  let db: Database.Database | undefined;
  try {
    db = new Database(dbPath, { readonly: true, fileMustExist: true });
    db.prepare("SELECT count(*) FROM sqlite_schema").get();
    return db;
  } catch (err) {
    db?.close();
    if ((err as { code?: string }).code === "SQLITE_CANTOPEN") {
      throw new ReexError("DB_FILE_NOT_FOUND", `cannot open database file: ${dbPath}`, { cause: err });
    }
    throw new ReexError("DB_INVALID", `not a readable SQLite database: ${dbPath} (${(err as Error).message})`, { cause: err });
  }
}

/** Quotes an SQL identifier with double quotes. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
