/**
 * The database registry: which SQLite files reex may query, under which stable ids, for which
 * API key. Files come from a server-side path (used in place, never modified) or from uploaded
 * bytes (copied into `<dataDir>/uploads/`). Entries persist in `<dataDir>/registry.json`.
 */
import { createHash, randomUUID } from "node:crypto";
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  statfsSync,
  writeSync,
} from "node:fs";
import { basename, extname, join, resolve, sep } from "node:path";
import { open } from "node:fs/promises";
import { looksLikeConnectionString, ReexError } from "../errors/index.js";
import { openReadonly } from "./guard.js";
import { OffThread } from "./offload.js";

/** One registered database. */
export interface DatabaseEntry {
  /** Stable id: the same path (or the same bytes) for the same owner always gets the same id. */
  id: string;
  /** Display name (file name without extension unless one was given). */
  name: string;
  /** Absolute path of the file queries run against, or a Postgres source's key (`postgres:<name>`, never its URL). */
  path: string;
  /** "path": a server-side file used in place; "upload": a copy reex owns under dataDir; "postgres": a PostgreSQL connection (not persisted). */
  source: "path" | "upload" | "postgres";
  /** API key id that registered it; entries without an owner are shared with every key. */
  owner?: string;
  sizeBytes: number;
  /** User tables and views, sorted by name. */
  tables: string[];
  /** ISO-8601 time of the first registration. */
  registeredAt: string;
}

/** Settings of a {@link DatabaseRegistry}. */
export interface DatabaseRegistryOptions {
  /** Folder for `registry.json` and `uploads/`; created when missing. */
  dataDir: string;
  /** When non-empty, registerPath only accepts files whose real path lies under one of these folders. Default: any path. */
  allowedRoots?: string[];
  /** Called with each warning (entries dropped on reload, unreadable registry file, uploads sharing a name). Default: none. */
  onWarning?: (message: string) => void;
  /**
   * Bytes of uploads one owner may keep (owner-less uploads count together), refused with
   * UPLOAD_QUOTA_EXCEEDED past it; 0 or absent: no limit. The server passes server.uploadQuotaBytesPerKey.
   */
  uploadQuotaPerOwner?: number;
  /** Bytes of uploads all owners together may keep, refused with STORAGE_FULL past it; 0 or absent: no limit. The server passes server.uploadQuotaBytes. */
  uploadQuotaTotal?: number;
}

/** Options of a registration. */
export interface RegisterOptions {
  /** API key id to own the entry. Default: none (shared). */
  owner?: string;
  /** Display name. Default: the file name without extension ("upload" for bytes). */
  name?: string;
}

const HEADER = Buffer.from("SQLite format 3\0", "latin1");
const REGISTRY_VERSION = 1;

/**
 * Checks that `path` holds a sound SQLite database and lists its tables: the 16-byte magic header,
 * the page count the header promises, then SQLite's `PRAGMA quick_check` on a read-only connection.
 * Throws DB_INVALID with a readable reason. Cost grows with the file (quick_check reads every page).
 */
export function validateDatabaseFile(path: string): { tables: string[] } {
  const size = statSync(path).size;
  const header = Buffer.alloc(100);
  const fd = openSync(path, "r");
  let read: number;
  try {
    read = readSync(fd, header, 0, 100, 0);
  } finally {
    closeSync(fd);
  }
  if (read < 100 || !header.subarray(0, 16).equals(HEADER)) {
    throw new ReexError("DB_INVALID", 'the file is not a SQLite database (it lacks the "SQLite format 3" header)');
  }
  const rawPageSize = header.readUInt16BE(16);
  const pageSize = rawPageSize === 1 ? 65536 : rawPageSize;
  if (pageSize < 512 || (pageSize & (pageSize - 1)) !== 0) throw new ReexError("DB_INVALID", `the SQLite header is corrupt (page size ${rawPageSize})`);
  const headerPages = header.readUInt32BE(28);
  const headerPagesValid = headerPages > 0 && header.readUInt32BE(24) === header.readUInt32BE(92);
  if (headerPagesValid && size < headerPages * pageSize) {
    throw new ReexError(
      "DB_INVALID",
      `the database file is truncated: its header promises ${headerPages} pages of ${pageSize} bytes but the file holds ${size} bytes`,
    );
  }
  let db;
  try {
    db = openReadonly(path);
  } catch (err) {
    if (err instanceof ReexError) throw err;
    throw new ReexError("DB_INVALID", `SQLite cannot open the file: ${(err as Error).message}`, { cause: err });
  }
  try {
    const problems = (db.pragma("quick_check(5)") as { quick_check: string }[]).map((r) => r.quick_check);
    if (problems.length !== 1 || problems[0] !== "ok") {
      throw new ReexError("DB_INVALID", `the database is corrupt (SQLite quick_check: ${problems.join("; ")})`);
    }
    const tables = db
      .prepare("SELECT name FROM sqlite_schema WHERE type IN ('table','view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
      .pluck()
      .all() as string[];
    return { tables };
  } catch (err) {
    if (err instanceof ReexError) throw err;
    throw new ReexError("DB_INVALID", `the database is corrupt or unreadable: ${(err as Error).message}`, { cause: err });
  } finally {
    db.close();
  }
}

const sha256 = (...parts: (string | Uint8Array)[]): string => {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest("hex");
};

/** Free space an upload must leave on the data folder's disk, bytes. */
const DISK_HEADROOM_BYTES = 64 * 1024 * 1024;

/** Bytes free to unprivileged users on the disk holding `dir` (or its nearest existing parent); undefined when unknown. */
function freeBytes(dir: string): number | undefined {
  for (let d = dir; ; d = resolve(d, "..")) {
    try {
      const st = statfsSync(d);
      return Number(st.bavail) * Number(st.bsize);
    } catch {
      if (resolve(d, "..") === d) return undefined;
    }
  }
}

/** Uploads at least this large are hashed in slices, written asynchronously and validated in a child process, so the event loop stays free. */
const LARGE_UPLOAD_BYTES = 8 * 1024 * 1024;
let validator: OffThread | undefined;

/** sha256(owner, "\0", bytes), hashing 1 MiB at a time and yielding to the event loop between slices. */
async function sha256Yielding(owner: string, bytes: Uint8Array): Promise<string> {
  const h = createHash("sha256");
  h.update(owner);
  h.update("\0");
  for (let off = 0; off < bytes.length; off += 1 << 20) {
    h.update(bytes.subarray(off, Math.min(bytes.length, off + (1 << 20))));
    await new Promise((r) => setImmediate(r));
  }
  return h.digest("hex");
}

const slug = (name: string): string =>
  name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 32)
    .replace(/-+$/, "") || "db";

/** Writes `data` to `path` through a fsynced temp file and a rename, so readers never see half a file. */
export function writeAtomic(path: string, data: Uint8Array | string): void {
  const tmp = `${path}.${randomUUID()}.tmp`;
  try {
    const fd = openSync(tmp, "wx");
    try {
      const buf = typeof data === "string" ? Buffer.from(data) : data;
      let off = 0;
      while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

function isEntry(value: unknown): value is DatabaseEntry {
  const e = value as DatabaseEntry;
  return (
    typeof e === "object" &&
    e !== null &&
    typeof e.id === "string" &&
    typeof e.name === "string" &&
    typeof e.path === "string" &&
    (e.source === "path" || e.source === "upload") &&
    (e.owner === undefined || typeof e.owner === "string") &&
    typeof e.sizeBytes === "number" &&
    Array.isArray(e.tables) &&
    typeof e.registeredAt === "string"
  );
}

/**
 * The message for a path that names no regular file. The path is shown unless it looks like a
 * database URL or connection string that did not parse as one (`pg://…`, `host=… password=…`, a
 * `name = postgres://…` with spaces): that one may hold a password, so it is described, not shown.
 */
function noFile(given: string, abs: string): string {
  if (!looksLikeConnectionString(given)) return `no regular file at ${abs}`;
  return (
    "no regular file at the path given, which looks like a database URL or connection string and is not shown (it may hold a password); " +
    "a PostgreSQL database is given as postgres://user:password@host:port/database or name=postgres://…"
  );
}

/**
 * Checks that `path` names a regular file holding a sound SQLite database, as a registration does
 * (without allowed roots), and returns its absolute path and tables; lists it nowhere. Throws
 * DB_FILE_NOT_FOUND or DB_INVALID.
 */
export function checkDatabasePath(path: string): { path: string; tables: string[] } {
  const abs = resolve(path);
  if (!statSync(abs, { throwIfNoEntry: false })?.isFile()) throw new ReexError("DB_FILE_NOT_FOUND", noFile(path, abs));
  return { path: abs, ...validateDatabaseFile(abs) };
}

/**
 * The set of databases reex may query, persisted in `<dataDir>/registry.json`. Visibility: a call
 * without `owner` (admin, or a server without API keys) sees every entry; a call with an owner
 * sees its own entries and the shared (owner-less) ones. An invisible entry reads as DB_NOT_FOUND.
 */
export class DatabaseRegistry {
  /** Warnings raised while loading (dropped entries, unreadable registry file). */
  readonly warnings: string[] = [];
  private readonly dataDir: string;
  private readonly uploadsDir: string;
  private readonly file: string;
  private readonly roots: string[] | undefined;
  private readonly onWarning: ((message: string) => void) | undefined;
  private readonly entries = new Map<string, DatabaseEntry>();
  private readonly external = new Map<string, DatabaseEntry>();
  private readonly quotaPerOwner: number;
  private readonly quotaTotal: number;
  /** Uploads being written and validated: their bytes and names count as taken until they are kept or refused. */
  private readonly pending = new Set<{ owner: string | undefined; name: string; bytes: number }>();

  constructor(options: DatabaseRegistryOptions) {
    this.dataDir = resolve(options.dataDir);
    this.uploadsDir = join(this.dataDir, "uploads");
    this.file = join(this.dataDir, "registry.json");
    this.onWarning = options.onWarning;
    this.quotaPerOwner = options.uploadQuotaPerOwner ?? 0;
    this.quotaTotal = options.uploadQuotaTotal ?? 0;
    this.roots = options.allowedRoots?.length ? options.allowedRoots.map((r) => (existsSync(r) ? realpathSync(r) : resolve(r))) : undefined;
    this.load();
  }

  /** Entries visible to `owner`, sorted by name then id. */
  list(owner?: string): DatabaseEntry[] {
    return [...this.entries.values(), ...this.external.values()]
      .filter((e) => visible(e, owner))
      .sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id))
      .map((e) => ({ ...e, tables: [...e.tables] }));
  }

  /**
   * The entry with this id, or else with this name when exactly one visible entry has it; throws
   * DB_NOT_FOUND otherwise (naming the visible entries' ids when several share the name).
   */
  get(idOrName: string, owner?: string): DatabaseEntry {
    let e = this.entries.get(idOrName) ?? this.external.get(idOrName);
    if (!e || !visible(e, owner)) {
      const named = [...this.entries.values(), ...this.external.values()].filter((c) => c.name === idOrName && visible(c, owner));
      if (named.length > 1) {
        const ids = named.map((c) => c.id).sort();
        throw new ReexError(
          "DB_NOT_FOUND",
          `no database with unique name "${idOrName}": ${ids.length} are named so (ids ${ids.join(", ")}), uploaded before upload names were unique; ask by id, or delete all but one (DELETE /v1/databases/<id>) to use the name again`,
        );
      }
      e = named[0];
    }
    if (!e) throw new ReexError("DB_NOT_FOUND", `no database with id or unique name "${idOrName}"`);
    return { ...e, tables: [...e.tables] };
  }

  /**
   * Registers a server-side SQLite file in place (read only, never modified). Throws
   * DB_FILE_NOT_FOUND, DB_PATH_NOT_ALLOWED or DB_INVALID. Registering it again refreshes the entry.
   */
  async registerPath(path: string, options: RegisterOptions = {}): Promise<DatabaseEntry> {
    const abs = resolve(path);
    if (!statSync(abs, { throwIfNoEntry: false })?.isFile()) throw new ReexError("DB_FILE_NOT_FOUND", noFile(path, abs));
    if (this.roots) {
      const real = realpathSync(abs);
      if (!this.roots.some((root) => real === root || real.startsWith(root.endsWith(sep) ? root : root + sep))) {
        throw new ReexError("DB_PATH_NOT_ALLOWED", `${abs} is outside the allowed roots`);
      }
    }
    const { tables } = validateDatabaseFile(abs);
    const id = `${slug(basename(abs, extname(abs)))}-${sha256(options.owner ?? "", "\0", abs).slice(0, 10)}`;
    const previous = this.entries.get(id);
    const entry: DatabaseEntry = {
      id,
      name: options.name ?? previous?.name ?? basename(abs, extname(abs)),
      path: abs,
      source: "path",
      ...(options.owner !== undefined ? { owner: options.owner } : {}),
      sizeBytes: statSync(abs).size,
      tables,
      registeredAt: previous?.registeredAt ?? new Date().toISOString(),
    };
    this.entries.set(id, entry);
    this.save();
    return { ...entry, tables: [...tables] };
  }

  /**
   * Lists a database reex reaches through a source other than a file (a PostgreSQL connection
   * under the key `postgres:<name>`), shared with every key, for this process only (never written
   * to registry.json). Its id is `pg-<name>`; registering the same key again replaces the entry.
   */
  registerSource(source: { key: string; name: string; tables: string[] }): DatabaseEntry {
    const entry: DatabaseEntry = {
      id: `pg-${slug(source.name)}`,
      name: source.name,
      path: source.key,
      source: "postgres",
      sizeBytes: 0,
      tables: [...source.tables].sort(),
      registeredAt: new Date().toISOString(),
    };
    this.external.set(entry.id, entry);
    return { ...entry, tables: [...entry.tables] };
  }

  /**
   * Registers uploaded database bytes: validated in a temp file, then renamed to
   * `<dataDir>/uploads/<id>.sqlite`; a rejected upload leaves nothing behind. The same bytes for
   * the same owner give the same id. A WAL-mode header is switched to rollback mode in the copy so
   * read-only connections never create -wal/-shm files. The same bytes again (unnamed, or under
   * the same name) give the same entry; under another name they are another entry, so requests by
   * the first name keep working. Names are unique among the uploads one owner sees (its own and
   * the shared ones): another file under a name in use is refused with DB_NAME_TAKEN, never
   * replaced, and an unnamed upload takes the first free of `upload`, `upload-2`, … The names of
   * the server's own databases (its examples, paths and PostgreSQL sources) are reserved
   * (BAD_REQUEST). Quotas are checked before anything is written: UPLOAD_QUOTA_EXCEEDED past the
   * owner's, STORAGE_FULL past the total or the disk's free space. Throws DB_INVALID too.
   */
  async registerBytes(bytes: Uint8Array, options: RegisterOptions = {}): Promise<DatabaseEntry> {
    const { owner, name: asked } = options;
    if (asked !== undefined && [...this.entries.values(), ...this.external.values()].some((e) => e.source !== "upload" && e.name === asked))
      throw new ReexError("BAD_REQUEST", `the name "${asked}" belongs to a database the server serves; upload under another name`);
    const large = bytes.length >= LARGE_UPLOAD_BYTES;
    const hash = large ? await sha256Yielding(owner ?? "", bytes) : sha256(owner ?? "", "\0", bytes);
    const contentId = `up-${hash.slice(0, 16)}`;
    const first = this.entries.get(contentId);
    const renamed = first !== undefined && asked !== undefined && asked !== first.name;
    const id = renamed ? `up-${sha256(hash, "\0", asked).slice(0, 16)}` : contentId;
    const path = join(this.uploadsDir, `${id}.sqlite`);
    const previous = this.entries.get(id);
    if (previous && existsSync(path)) return { ...previous, tables: [...previous.tables] };
    const claim = this.claim(owner, asked, bytes.length);
    let tables: string[];
    try {
      tables = await this.store(bytes, id, path, large);
    } finally {
      this.pending.delete(claim);
    }
    const entry: DatabaseEntry = {
      id,
      name: claim.name,
      path,
      source: "upload",
      ...(owner !== undefined ? { owner } : {}),
      sizeBytes: bytes.length,
      tables,
      registeredAt: new Date().toISOString(),
    };
    this.entries.set(id, entry);
    this.save();
    return { ...entry, tables: [...tables] };
  }

  /** Bytes of uploads `owner` keeps (owner-less uploads together for undefined), and of all uploads, pending ones included. */
  uploadUsage(owner?: string): { ownerBytes: number; totalBytes: number } {
    let ownerBytes = 0;
    let totalBytes = 0;
    const count = (o: string | undefined, n: number): void => {
      totalBytes += n;
      if (o === owner) ownerBytes += n;
    };
    for (const e of this.entries.values()) if (e.source === "upload") count(e.owner, e.sizeBytes);
    for (const p of this.pending) count(p.owner, p.bytes);
    return { ownerBytes, totalBytes };
  }

  /**
   * Takes the name and the bytes of a new upload before it is written: DB_NAME_TAKEN when an
   * upload `owner` sees (or a pending one) has the name, UPLOAD_QUOTA_EXCEEDED past the owner's
   * quota, STORAGE_FULL past the total quota or the disk's free space. The caller deletes the claim
   * from `pending` once the upload is kept or refused.
   */
  private claim(owner: string | undefined, asked: string | undefined, bytes: number): { owner: string | undefined; name: string; bytes: number } {
    const uploads = [
      ...[...this.entries.values()].filter((e) => e.source === "upload").map((e) => ({ id: e.id as string | undefined, name: e.name, owner: e.owner })),
      ...[...this.pending].map((p) => ({ id: undefined, name: p.name, owner: p.owner })),
    ].filter((e) => owner === undefined || e.owner === undefined || e.owner === owner);
    const taken = (n: string): boolean => uploads.some((e) => e.name === n);
    let name = asked ?? "upload";
    if (asked === undefined) for (let i = 2; taken(name); i++) name = `upload-${i}`;
    else if (taken(asked)) {
      const ids = uploads.flatMap((e) => (e.id !== undefined && e.name === asked ? [e.id] : [])).sort();
      const which = ids.length > 0 ? `upload ${ids.join(", ")}` : "an upload still in progress";
      throw new ReexError(
        "DB_NAME_TAKEN",
        `the name "${asked}" is taken by ${which}; upload under another name, or delete it first (DELETE /v1/databases/<id>): an upload never replaces another`,
        { details: { ids } },
      );
    }
    const { ownerBytes, totalBytes } = this.uploadUsage(owner);
    const mib = (n: number): string => `${(n / 1048576).toFixed(1)} MiB`;
    if (this.quotaPerOwner > 0 && ownerBytes + bytes > this.quotaPerOwner) {
      throw new ReexError(
        "UPLOAD_QUOTA_EXCEEDED",
        `this upload (${mib(bytes)}) would take this key's uploads to ${mib(ownerBytes + bytes)}, over its quota of ${mib(this.quotaPerOwner)} (server.uploadQuotaBytesPerKey); delete some first`,
        { details: { sizeBytes: bytes, usedBytes: ownerBytes, quotaBytes: this.quotaPerOwner } },
      );
    }
    if (this.quotaTotal > 0 && totalBytes + bytes > this.quotaTotal) {
      throw new ReexError(
        "STORAGE_FULL",
        `this upload (${mib(bytes)}) would take the server's uploads past their total quota of ${mib(this.quotaTotal)} (server.uploadQuotaBytes)`,
        { details: { sizeBytes: bytes, quotaBytes: this.quotaTotal } },
      );
    }
    const free = freeBytes(this.dataDir);
    if (free !== undefined && free < bytes + DISK_HEADROOM_BYTES) {
      throw new ReexError("STORAGE_FULL", `the disk under sql.dataDir has ${mib(free)} free, too little for this upload (${mib(bytes)})`, {
        details: { sizeBytes: bytes },
      });
    }
    const claim = { owner, name, bytes };
    this.pending.add(claim);
    return claim;
  }

  /** Writes `bytes` to a temp file in uploads/, validates it and renames it to `path`; leaves nothing behind when it fails. Returns the tables. */
  private async store(bytes: Uint8Array, id: string, path: string, large: boolean): Promise<string[]> {
    mkdirSync(this.uploadsDir, { recursive: true });
    const tmp = join(this.uploadsDir, `.${id}.${randomUUID()}.tmp`);
    const walHeader = bytes.length >= 20 && bytes[18] === 2 && bytes[19] === 2;
    try {
      let tables: string[];
      if (large) {
        const fh = await open(tmp, "wx");
        try {
          await fh.writeFile(bytes);
          if (walHeader) await fh.write(Buffer.from([1, 1]), 0, 2, 18);
          await fh.sync();
        } finally {
          await fh.close();
        }
        tables = (await (validator ??= new OffThread()).validate(tmp)).tables;
      } else {
        const fd = openSync(tmp, "wx");
        try {
          let off = 0;
          while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
          if (walHeader) writeSync(fd, Buffer.from([1, 1]), 0, 2, 18);
          fsyncSync(fd);
        } finally {
          closeSync(fd);
        }
        tables = validateDatabaseFile(tmp).tables;
      }
      renameSync(tmp, path);
      return tables;
    } catch (err) {
      for (const suffix of ["", "-wal", "-shm", "-journal"]) rmSync(tmp + suffix, { force: true });
      if ((err as NodeJS.ErrnoException).code === "ENOSPC")
        throw new ReexError("STORAGE_FULL", "the disk under sql.dataDir filled up while the upload was written; nothing was kept", { cause: err });
      throw err;
    }
  }

  /**
   * Removes an uploaded database and deletes its file. Throws DB_NOT_FOUND (unknown or invisible),
   * DB_READ_ONLY_ENTRY (registered from a path) or FORBIDDEN (a shared upload and a caller with an owner).
   */
  async remove(id: string, owner?: string): Promise<void> {
    const entry = this.get(id, owner);
    if (entry.source !== "upload") {
      const from = entry.source === "postgres" ? "a PostgreSQL connection in the server's settings" : "a server-side path";
      throw new ReexError("DB_READ_ONLY_ENTRY", `database "${id}" was registered from ${from} and cannot be removed`);
    }
    if (owner !== undefined && entry.owner !== owner) throw new ReexError("FORBIDDEN", `database "${id}" is shared and cannot be removed with this key`);
    this.entries.delete(id);
    this.save();
    rmSync(entry.path, { force: true });
  }

  private warn(message: string): void {
    this.warnings.push(message);
    this.onWarning?.(message);
  }

  private load(): void {
    let text: string;
    try {
      text = readFileSync(this.file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
      throw err;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const list = (parsed as { version?: unknown; entries?: unknown } | undefined)?.entries;
    if (!Array.isArray(list)) {
      const aside = `${this.file}.invalid-${Date.now()}`;
      renameSync(this.file, aside);
      this.warn(`registry file ${this.file} is unreadable; moved it to ${aside} and started empty`);
      return;
    }
    let dropped = false;
    for (const item of list) {
      if (!isEntry(item)) {
        this.warn(`dropped a malformed registry entry: ${JSON.stringify(item).slice(0, 200)}`);
        dropped = true;
      } else if (!statSync(item.path, { throwIfNoEntry: false })?.isFile()) {
        this.warn(`dropped database "${item.id}" (${item.name}): its file ${item.path} no longer exists`);
        dropped = true;
      } else {
        this.entries.set(item.id, item);
      }
    }
    if (existsSync(this.uploadsDir)) {
      for (const f of readdirSync(this.uploadsDir)) if (f.startsWith(".") && f.endsWith(".tmp")) rmSync(join(this.uploadsDir, f), { force: true });
    }
    if (dropped) this.save();
    this.warnSharedNames();
  }

  /**
   * Warns of each name that several uploads one caller sees share, left by versions before upload
   * names were unique: they load and answer by id; the name itself reads as DB_NOT_FOUND listing them.
   */
  private warnSharedNames(): void {
    const byName = new Map<string, DatabaseEntry[]>();
    for (const e of this.entries.values()) if (e.source === "upload") byName.set(e.name, [...(byName.get(e.name) ?? []), e]);
    for (const [name, group] of byName) {
      const owners = group.map((e) => e.owner);
      const clash = owners.some((o, i) => o === undefined || owners.indexOf(o) !== i);
      if (group.length < 2 || !clash) continue;
      const ids = group.map((e) => e.id).sort();
      this.warn(
        `${ids.length} uploads share the name "${name}" (ids ${ids.join(", ")}), left from before upload names were unique: ask for them by id, or delete all but one (DELETE /v1/databases/<id>) to use the name again`,
      );
    }
  }

  private save(): void {
    mkdirSync(this.dataDir, { recursive: true });
    writeAtomic(this.file, JSON.stringify({ version: REGISTRY_VERSION, entries: [...this.entries.values()] }, null, 2) + "\n");
  }
}

function visible(entry: DatabaseEntry, owner: string | undefined): boolean {
  return owner === undefined || entry.owner === undefined || entry.owner === owner;
}
