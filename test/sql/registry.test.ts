import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseRegistry, closeDirectConnections, executeDirect } from "../../src/sql/index.js";
import { fileHash, listDir, makeFixtureDb, removeDir, tempDir } from "./helpers.js";

let root: string;
let counter = 0;

beforeAll(() => {
  root = tempDir("reex-registry-");
});

afterAll(() => {
  closeDirectConnections();
  removeDir(root);
});

/** A fresh folder with a fixture database and an empty data dir. */
function setup(): { dbDir: string; db: string; dataDir: string } {
  const base = join(root, `case-${++counter}`);
  const dbDir = join(base, "dbs");
  mkdirSync(dbDir, { recursive: true });
  return { dbDir, db: makeFixtureDb(join(dbDir, "Sales Data.sqlite")), dataDir: join(base, "data") };
}

describe("DatabaseRegistry", () => {
  it("registers a server-side file in place with its tables, and never modifies it", async () => {
    const { dbDir, db, dataDir } = setup();
    const before = fileHash(db);
    const files = listDir(dbDir);
    const entry = await new DatabaseRegistry({ dataDir }).registerPath(db);
    expect(entry).toMatchObject({ name: "Sales Data", path: db, source: "path", sizeBytes: readFileSync(db).length, tables: ["e", "t", "v"] });
    expect(entry.id).toMatch(/^sales-data-[0-9a-f]{10}$/);
    expect(entry.owner).toBeUndefined();
    expect(Number.isNaN(Date.parse(entry.registeredAt))).toBe(false);
    expect(fileHash(db)).toBe(before);
    expect(listDir(dbDir)).toEqual(files);
  });

  it("gives the same path the same id (relative or absolute, across instances), per owner", async () => {
    const { db, dataDir } = setup();
    const registry = new DatabaseRegistry({ dataDir });
    const first = await registry.registerPath(db);
    const again = await registry.registerPath(relative(process.cwd(), db), { name: "renamed" });
    expect(again.id).toBe(first.id);
    expect(again.name).toBe("renamed");
    expect(again.registeredAt).toBe(first.registeredAt);
    expect((await new DatabaseRegistry({ dataDir }).registerPath(db)).id).toBe(first.id);
    expect((await registry.registerPath(db, { owner: "key-a" })).id).not.toBe(first.id);
    expect(registry.list()).toHaveLength(2);
  });

  it("finds an entry by its name when exactly one visible entry has that name", async () => {
    const { db, dataDir } = setup();
    const registry = new DatabaseRegistry({ dataDir });
    const entry = await registry.registerPath(db, { name: "sales" });
    expect(registry.get("sales").id).toBe(entry.id);
    await registry.registerPath(db, { name: "sales", owner: "key-a" });
    expect(registry.get("sales", "key-b").id).toBe(entry.id);
    expect(() => registry.get("sales")).toThrow(/DB_NOT_FOUND|no database/);
  });

  it("names the ids a shared name stands for, only those the caller may see", async () => {
    const { db, dataDir } = setup();
    const registry = new DatabaseRegistry({ dataDir });
    const shared = await registry.registerBytes(readFileSync(db), { name: "sales" });
    const mine = await registry.registerBytes(readFileSync(db), { name: "sales", owner: "key-a" });
    const theirs = await registry.registerBytes(readFileSync(db), { name: "sales", owner: "key-b" });
    const error = (() => {
      try {
        registry.get("sales", "key-a");
      } catch (e) {
        return e as { code: string; message: string };
      }
    })();
    expect(error?.code).toBe("DB_NOT_FOUND");
    expect(error?.message).toContain(shared.id);
    expect(error?.message).toContain(mine.id);
    expect(error?.message).not.toContain(theirs.id);
  });

  it("keeps the names of the server's own databases for them: an upload may not take one", async () => {
    const { db, dataDir } = setup();
    const registry = new DatabaseRegistry({ dataDir });
    const served = await registry.registerPath(db, { name: "sales" });
    for (const owner of [undefined, "key-a"]) {
      await expect(registry.registerBytes(readFileSync(db), { name: "sales", ...(owner ? { owner } : {}) })).rejects.toMatchObject({ code: "BAD_REQUEST" });
    }
    expect(registry.get("sales").id).toBe(served.id);
    expect(registry.list().filter((e) => e.name === "sales")).toHaveLength(1);
  });

  it("stores uploaded bytes under dataDir/uploads with a content-hash id, queryable, leaving the source alone", async () => {
    const { db, dataDir } = setup();
    const registry = new DatabaseRegistry({ dataDir });
    const bytes = readFileSync(db);
    const entry = await registry.registerBytes(bytes, { name: "sales" });
    expect(entry).toMatchObject({ name: "sales", source: "upload", sizeBytes: bytes.length, tables: ["e", "t", "v"] });
    expect(entry.id).toMatch(/^up-[0-9a-f]{16}$/);
    expect(entry.path).toBe(join(dataDir, "uploads", `${entry.id}.sqlite`));
    expect(readFileSync(entry.path).equals(bytes)).toBe(true);
    expect((await registry.registerBytes(Buffer.from(bytes))).id).toBe(entry.id);
    expect(registry.list()).toHaveLength(1);
    expect(executeDirect(entry.path, "SELECT count(*) FROM t")).toMatchObject({ ok: true, rows: [[50]] });
    expect(listDir(join(dataDir, "uploads"))).toEqual([`${entry.id}.sqlite`]);
  });

  it("switches an uploaded WAL-mode database to rollback mode so queries create no -wal/-shm files", async () => {
    const { dbDir, dataDir } = setup();
    const wal = makeFixtureDb(join(dbDir, "wal.sqlite"), { wal: true });
    const bytes = readFileSync(wal);
    expect([bytes[18], bytes[19]]).toEqual([2, 2]);
    const entry = await new DatabaseRegistry({ dataDir }).registerBytes(bytes);
    const stored = readFileSync(entry.path);
    expect([stored[18], stored[19]]).toEqual([1, 1]);
    expect(executeDirect(entry.path, "SELECT count(*) FROM t")).toMatchObject({ ok: true, rows: [[50]] });
    expect(listDir(join(dataDir, "uploads"))).toEqual([`${entry.id}.sqlite`]);
  });

  it("rejects a missing path or a folder with DB_FILE_NOT_FOUND", async () => {
    const { dbDir, dataDir } = setup();
    const registry = new DatabaseRegistry({ dataDir });
    await expect(registry.registerPath(join(dbDir, "nope.sqlite"))).rejects.toMatchObject({ code: "DB_FILE_NOT_FOUND" });
    await expect(registry.registerPath(dbDir)).rejects.toMatchObject({ code: "DB_FILE_NOT_FOUND" });
  });

  it("rejects non-SQLite, truncated and corrupt files with DB_INVALID, and a rejected upload leaves nothing behind", async () => {
    const { dbDir, db, dataDir } = setup();
    const registry = new DatabaseRegistry({ dataDir });
    const text = join(dbDir, "notes.sqlite");
    writeFileSync(text, "CREATE TABLE t (a); -- a SQL script, not a database\n".repeat(100));
    await expect(registry.registerPath(text)).rejects.toMatchObject({ code: "DB_INVALID", message: expect.stringMatching(/not a SQLite database/) });
    await expect(registry.registerBytes(Buffer.from("tiny"))).rejects.toMatchObject({ code: "DB_INVALID" });

    const bytes = readFileSync(db);
    const truncated = join(dbDir, "truncated.sqlite");
    writeFileSync(truncated, bytes);
    truncateSync(truncated, Math.floor(bytes.length / 2));
    await expect(registry.registerPath(truncated)).rejects.toMatchObject({ code: "DB_INVALID", message: expect.stringMatching(/truncated/) });
    await expect(registry.registerBytes(bytes.subarray(0, Math.floor(bytes.length / 2)))).rejects.toMatchObject({ code: "DB_INVALID" });

    const pageSize = bytes.readUInt16BE(16);
    const corrupt = Buffer.from(bytes);
    corrupt.fill(0xab, pageSize, 2 * pageSize);
    await expect(registry.registerBytes(corrupt)).rejects.toMatchObject({ code: "DB_INVALID", message: expect.stringMatching(/corrupt/) });

    expect(existsSync(join(dataDir, "uploads")) ? listDir(join(dataDir, "uploads")) : []).toEqual([]);
    expect(existsSync(join(dataDir, "registry.json"))).toBe(false);
    expect(registry.list()).toEqual([]);
  });

  it("persists entries across instances and drops, with a warning, those whose file vanished", async () => {
    const { dbDir, db, dataDir } = setup();
    const other = makeFixtureDb(join(dbDir, "other.sqlite"));
    const first = new DatabaseRegistry({ dataDir });
    const kept = await first.registerPath(db);
    const gone = await first.registerPath(other);
    const upload = await first.registerBytes(readFileSync(db), { owner: "key-a" });
    expect(
      new DatabaseRegistry({ dataDir })
        .list()
        .map((e) => e.id)
        .sort(),
    ).toEqual([kept.id, gone.id, upload.id].sort());
    rmSync(other);
    const seen: string[] = [];
    const second = new DatabaseRegistry({ dataDir, onWarning: (m) => seen.push(m) });
    expect(
      second
        .list()
        .map((e) => e.id)
        .sort(),
    ).toEqual([kept.id, upload.id].sort());
    expect(second.get(upload.id)).toEqual(upload);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatch(new RegExp(gone.id));
    expect(second.warnings).toEqual(seen);
    const onDisk = JSON.parse(readFileSync(join(dataDir, "registry.json"), "utf8")) as { entries: { id: string }[] };
    expect(onDisk.entries.map((e) => e.id).sort()).toEqual([kept.id, upload.id].sort());
  });

  it("moves an unreadable registry file aside with a warning and starts empty", () => {
    const { dataDir } = setup();
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(join(dataDir, "registry.json"), "{ not json");
    const registry = new DatabaseRegistry({ dataDir });
    expect(registry.list()).toEqual([]);
    expect(registry.warnings[0]).toMatch(/unreadable/);
    expect(listDir(dataDir).some((f) => f.startsWith("registry.json.invalid-"))).toBe(true);
  });

  it("removes uploads (deleting the file) but refuses to remove path entries", async () => {
    const { db, dataDir } = setup();
    const registry = new DatabaseRegistry({ dataDir });
    const pathEntry = await registry.registerPath(db);
    const upload = await registry.registerBytes(readFileSync(db));
    await expect(registry.remove(pathEntry.id)).rejects.toMatchObject({ code: "DB_READ_ONLY_ENTRY" });
    await registry.remove(upload.id);
    expect(existsSync(upload.path)).toBe(false);
    expect(() => registry.get(upload.id)).toThrow(expect.objectContaining({ code: "DB_NOT_FOUND" }));
    await expect(registry.remove(upload.id)).rejects.toMatchObject({ code: "DB_NOT_FOUND" });
    expect(new DatabaseRegistry({ dataDir }).list().map((e) => e.id)).toEqual([pathEntry.id]);
    expect(existsSync(db)).toBe(true);
  });

  it("isolates owners: another key's entry reads as DB_NOT_FOUND, shared entries are visible to all", async () => {
    const { db, dataDir } = setup();
    const registry = new DatabaseRegistry({ dataDir });
    const bytes = readFileSync(db);
    const mine = await registry.registerBytes(bytes, { owner: "key-a" });
    const theirs = await registry.registerBytes(bytes, { owner: "key-b" });
    const shared = await registry.registerBytes(Buffer.concat([bytes]), { name: "shared" });
    expect(new Set([mine.id, theirs.id, shared.id]).size).toBe(3);
    expect(
      registry
        .list("key-a")
        .map((e) => e.id)
        .sort(),
    ).toEqual([mine.id, shared.id].sort());
    expect(
      registry
        .list()
        .map((e) => e.id)
        .sort(),
    ).toEqual([mine.id, theirs.id, shared.id].sort());
    expect(() => registry.get(theirs.id, "key-a")).toThrow(expect.objectContaining({ code: "DB_NOT_FOUND" }));
    expect(registry.get(mine.id, "key-a").owner).toBe("key-a");
    await expect(registry.remove(theirs.id, "key-a")).rejects.toMatchObject({ code: "DB_NOT_FOUND" });
    await expect(registry.remove(shared.id, "key-a")).rejects.toMatchObject({ code: "FORBIDDEN" });
    await registry.remove(mine.id, "key-a");
    expect(
      registry
        .list("key-b")
        .map((e) => e.id)
        .sort(),
    ).toEqual([theirs.id, shared.id].sort());
  });

  it("confines path registration to allowedRoots, following symlinks", async () => {
    const { dbDir, db, dataDir } = setup();
    const inside = join(dbDir, "..", "allowed");
    mkdirSync(inside);
    const link = join(inside, "link.sqlite");
    symlinkSync(db, link);
    const registry = new DatabaseRegistry({ dataDir, allowedRoots: [inside] });
    await expect(registry.registerPath(db)).rejects.toMatchObject({ code: "DB_PATH_NOT_ALLOWED" });
    await expect(registry.registerPath(link)).rejects.toMatchObject({ code: "DB_PATH_NOT_ALLOWED" });
    const ok = makeFixtureDb(join(inside, "ok.sqlite"));
    expect((await registry.registerPath(ok)).source).toBe("path");
  });
});
