import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import Database from "better-sqlite3";
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

/** The bytes of a small database that differs from every other `n`'s, written under `dir`. */
function distinctDb(dir: string, n: number): Buffer {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `distinct-${n}.sqlite`);
  rmSync(path, { force: true });
  const db = new Database(path);
  db.exec(`CREATE TABLE d (n INTEGER); INSERT INTO d VALUES (${n})`);
  db.close();
  return readFileSync(path);
}

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

  it("loads a registry left with several uploads under one name, warns naming them, and names only the ids the caller may see", async () => {
    const { db, dataDir } = setup();
    const first = new DatabaseRegistry({ dataDir });
    const shared = await first.registerBytes(readFileSync(db), { name: "sales-1" });
    const mine = await first.registerBytes(readFileSync(db), { name: "sales-2", owner: "key-a" });
    const theirs = await first.registerBytes(readFileSync(db), { name: "sales-3", owner: "key-b" });
    // what versions before unique upload names could leave behind
    const file = join(dataDir, "registry.json");
    const onDisk = JSON.parse(readFileSync(file, "utf8")) as { entries: { name: string }[] };
    for (const e of onDisk.entries) e.name = "sales";
    writeFileSync(file, JSON.stringify(onDisk));
    const registry = new DatabaseRegistry({ dataDir });
    expect(registry.list()).toHaveLength(3);
    expect(registry.warnings).toHaveLength(1);
    expect(registry.warnings[0]).toMatch(/3 uploads share the name "sales"/);
    for (const id of [shared.id, mine.id, theirs.id]) expect(registry.warnings[0]).toContain(id);
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
    expect(error?.message).toMatch(/delete all but one/);
    expect(registry.get(mine.id, "key-a").name).toBe("sales");
    // another file under the name is refused, naming both holders; the same bytes are their entry again
    const other = await registry.registerBytes(distinctDb(dataDir, 1), { name: "sales", owner: "key-a" }).catch((e: unknown) => e);
    expect(other).toMatchObject({ code: "DB_NAME_TAKEN", details: { ids: [shared.id, mine.id].sort() } });
    expect((await registry.registerBytes(readFileSync(db), { name: "sales", owner: "key-a" })).id).toBe(mine.id);
    // with all but one deleted, the name answers again
    await registry.remove(shared.id);
    expect(registry.get("sales", "key-a").id).toBe(mine.id);
  });

  it("keeps upload names unique per owner: another file under a name in use is DB_NAME_TAKEN, unnamed uploads are numbered", async () => {
    const { dbDir, db, dataDir } = setup();
    const other = distinctDb(dbDir, 7);
    const registry = new DatabaseRegistry({ dataDir });
    const sales = await registry.registerBytes(readFileSync(db), { name: "sales", owner: "key-a" });
    await expect(registry.registerBytes(other, { name: "sales", owner: "key-a" })).rejects.toMatchObject({
      code: "DB_NAME_TAKEN",
      details: { ids: [sales.id] },
    });
    // a shared upload would make key-a's name ambiguous, so it is refused too; another key's own name is not
    await expect(registry.registerBytes(other, { name: "sales" })).rejects.toMatchObject({ code: "DB_NAME_TAKEN" });
    expect((await registry.registerBytes(other, { name: "sales", owner: "key-b" })).name).toBe("sales");
    expect(registry.get("sales", "key-a").id).toBe(sales.id);
    expect((await registry.registerBytes(other, { owner: "key-a" })).name).toBe("upload");
    const third = distinctDb(dbDir, 9);
    expect((await registry.registerBytes(third, { owner: "key-a" })).name).toBe("upload-2");
    expect(listDir(join(dataDir, "uploads")).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  });

  it("holds uploads to a quota per owner and in total, counting uploads in flight, and keeps nothing it refuses", async () => {
    const { dbDir, dataDir } = setup();
    const big = (n: number): Buffer => {
      const path = join(dbDir, `big-${n}.sqlite`);
      const d = new Database(path);
      d.exec(`CREATE TABLE b (n INTEGER, x BLOB); INSERT INTO b VALUES (${n}, zeroblob(9000000))`);
      d.close();
      return readFileSync(path);
    };
    const [one, two, three] = [big(1), big(2), big(3)];
    const registry = new DatabaseRegistry({ dataDir, uploadQuotaPerOwner: Math.floor(1.5 * one.length), uploadQuotaTotal: Math.floor(2.5 * one.length) });
    // two large uploads at once (hashed and validated asynchronously): the second counts the first's bytes
    const results = await Promise.allSettled([registry.registerBytes(one, { owner: "key-a" }), registry.registerBytes(two, { owner: "key-a" })]);
    expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect((results.find((r) => r.status === "rejected") as PromiseRejectedResult).reason).toMatchObject({ code: "UPLOAD_QUOTA_EXCEEDED" });
    expect(registry.uploadUsage("key-a").ownerBytes).toBe(one.length);
    await registry.registerBytes(two, { owner: "key-b" });
    await expect(registry.registerBytes(three, { owner: "key-c" })).rejects.toMatchObject({ code: "STORAGE_FULL" });
    expect(listDir(join(dataDir, "uploads"))).toHaveLength(2);
    expect(registry.uploadUsage().totalBytes).toBe(2 * one.length);
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
