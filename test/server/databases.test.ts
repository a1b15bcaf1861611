import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { makeApp, makeSqlite, sqliteBytes, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("/v1/databases", () => {
  it("uploads a SQLite file as the raw body and lists, describes and deletes it", async () => {
    t = await makeApp();
    const up = await t.app.inject({
      method: "POST",
      url: "/v1/databases?name=concerts",
      headers: { "content-type": "application/vnd.sqlite3" },
      payload: sqliteBytes(t.dir),
    });
    expect(up.statusCode).toBe(201);
    const created = up.json();
    expect(created).toEqual({ id: expect.any(String), name: "concerts", tables: ["concert", "singer"], source: "upload" });

    const list = await t.app.inject({ method: "GET", url: "/v1/databases" });
    expect(list.statusCode).toBe(200);
    const names = (list.json().databases as { name: string; source: string; path?: string }[]).map((d) => [d.name, d.source, d.path !== undefined]);
    expect(names).toEqual(
      expect.arrayContaining([
        ["concerts", "upload", false],
        ["shared", "path", false],
      ]),
    );
    expect(list.body).not.toContain(t.dir);

    const one = await t.app.inject({ method: "GET", url: `/v1/databases/${created.id}` });
    expect(one.statusCode).toBe(200);
    const detail = one.json();
    expect(detail).toMatchObject({ id: created.id, name: "concerts", source: "upload", tables: ["concert", "singer"] });
    expect(detail.path).toBeUndefined();
    const singer = (detail.schema.tables as { name: string; columns: { name: string }[] }[]).find((x) => x.name === "singer");
    expect(singer?.columns.map((c) => c.name)).toEqual(["singer_id", "name", "country", "age"]);
    expect(JSON.stringify(detail.schema)).not.toContain(t.dir);

    const del = await t.app.inject({ method: "DELETE", url: `/v1/databases/${created.id}` });
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe("");
    const gone = await t.app.inject({ method: "GET", url: `/v1/databases/${created.id}` });
    expect(gone.statusCode).toBe(404);
    expect(gone.json().code).toBe("DB_NOT_FOUND");
  });

  it("accepts application/octet-stream uploads and names them from ?name=", async () => {
    t = await makeApp();
    const up = await t.app.inject({
      method: "POST",
      url: "/v1/databases?name=x",
      headers: { "content-type": "application/octet-stream" },
      payload: sqliteBytes(t.dir),
    });
    expect(up.statusCode).toBe(201);
    expect(up.json().name).toBe("x");
  });

  it("refuses upload names with control, format or bidi characters and names the server's own databases hold, and keeps every other name", async () => {
    t = await makeApp();
    const bytes = sqliteBytes(t.dir);
    const upload = (name: string) =>
      t!.app.inject({
        method: "POST",
        url: `/v1/databases?name=${encodeURIComponent(name)}`,
        headers: { "content-type": "application/octet-stream" },
        payload: bytes,
      });
    for (const name of ["a\u0000b", "two\nlines", "tab\there", "evil\u202Egnp.exe", "zero\u200Bwidth", "line\u2028sep", " padded"]) {
      const r = await upload(name);
      expect(r.statusCode, JSON.stringify(name)).toBe(400);
      expect(r.json().code).toBe("BAD_REQUEST");
    }
    const taken = await upload("shared");
    expect(taken.statusCode).toBe(400);
    expect(taken.json()).toMatchObject({ code: "BAD_REQUEST", message: expect.stringMatching(/"shared" belongs to a database the server serves/) });
    const byName = await t.app.inject({ method: "GET", url: "/v1/databases/shared" });
    expect(byName.statusCode).toBe(200);
    expect(byName.json().source).toBe("path");
    const turkish = await upload("İstanbul müşterileri");
    expect(turkish.statusCode).toBe(201);
    expect(turkish.json().name).toBe("İstanbul müşterileri");
  });

  it("rejects bytes that are not SQLite with DB_INVALID and empty uploads with BAD_REQUEST", async () => {
    t = await makeApp();
    const bad = await t.app.inject({
      method: "POST",
      url: "/v1/databases",
      headers: { "content-type": "application/octet-stream" },
      payload: Buffer.from("definitely not a database, just text padding it out to one hundred bytes or so ........................................"),
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().code).toBe("DB_INVALID");
    const empty = await t.app.inject({
      method: "POST",
      url: "/v1/databases",
      headers: { "content-type": "application/octet-stream" },
      payload: Buffer.alloc(0),
    });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().code).toBe("BAD_REQUEST");
  });

  it("rejects uploads over server.bodyLimitBytes with PAYLOAD_TOO_LARGE", async () => {
    t = await makeApp({ server: { bodyLimitBytes: 4096 } });
    const res = await t.app.inject({
      method: "POST",
      url: "/v1/databases",
      headers: { "content-type": "application/octet-stream" },
      payload: Buffer.alloc(10_000, 1),
    });
    expect(res.statusCode).toBe(413);
    expect(res.json().code).toBe("PAYLOAD_TOO_LARGE");
  });

  it("refuses path registration unless allowed, and outside server.allowedRoots", async () => {
    t = await makeApp();
    const path = makeSqlite(t.dir, "p.sqlite");
    const off = await t.app.inject({ method: "POST", url: "/v1/databases", payload: { path } });
    expect(off.statusCode).toBe(403);
    expect(off.json().code).toBe("DB_PATH_NOT_ALLOWED");
    await t.cleanup();

    t = await makeApp({ server: { allowPathRegistration: true } });
    const noRoots = await t.app.inject({ method: "POST", url: "/v1/databases", payload: { path: makeSqlite(t.dir, "p.sqlite") } });
    expect(noRoots.json().code).toBe("DB_PATH_NOT_ALLOWED");
  });

  it("registers a path under an allowed root, and refuses escapes by .. and by symlink", async () => {
    t = await makeApp({ server: { allowPathRegistration: true } });
    await t.app.close();
    const root = join(t.dir, "root");
    mkdirSync(root);
    const inside = makeSqlite(root, "in.sqlite");
    const outside = makeSqlite(t.dir, "out.sqlite");
    symlinkSync(outside, join(root, "link.sqlite"));
    writeFileSync(join(root, "notes.txt"), "x".repeat(200));
    const dir = t.dir;
    t = await makeApp({ server: { allowPathRegistration: true, allowedRoots: [root] } });

    const ok = await t.app.inject({ method: "POST", url: "/v1/databases", payload: { path: inside, name: "inside" } });
    expect(ok.statusCode).toBe(201);
    expect(ok.json()).toMatchObject({ name: "inside", source: "path", tables: ["concert", "singer"] });

    for (const path of [outside, join(root, "..", "out.sqlite"), join(root, "link.sqlite")]) {
      const res = await t.app.inject({ method: "POST", url: "/v1/databases", payload: { path } });
      expect(res.statusCode, path).toBe(403);
      expect(res.json().code).toBe("DB_PATH_NOT_ALLOWED");
    }
    const missing = await t.app.inject({ method: "POST", url: "/v1/databases", payload: { path: join(root, "missing.sqlite") } });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().code).toBe("DB_FILE_NOT_FOUND");
    const notDb = await t.app.inject({ method: "POST", url: "/v1/databases", payload: { path: join(root, "notes.txt") } });
    expect(notDb.statusCode).toBe(400);
    expect(notDb.json().code).toBe("DB_INVALID");
    expect(dir).toBeTruthy();
  });

  it("refuses to delete a path registration with DB_READ_ONLY_ENTRY", async () => {
    t = await makeApp();
    const res = await t.app.inject({ method: "DELETE", url: `/v1/databases/${t.dbId}` });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe("DB_READ_ONLY_ENTRY");
  });

  it("validates the JSON body and the query with BAD_REQUEST", async () => {
    t = await makeApp({ server: { allowPathRegistration: true, allowedRoots: ["/tmp"] } });
    const res = await t.app.inject({ method: "POST", url: "/v1/databases", payload: { path: 3, other: true } });
    expect(res.statusCode).toBe(400);
    expect((res.json().issues as { path: string[] }[]).map((i) => i.path.join("."))).toEqual(expect.arrayContaining(["body.path", "body"]));
    const q = await t.app.inject({
      method: "POST",
      url: "/v1/databases?bogus=1",
      headers: { "content-type": "application/octet-stream" },
      payload: sqliteBytes(t.dir),
    });
    expect(q.statusCode).toBe(400);
    expect(q.json().issues[0].path).toEqual(["query"]);
  });
});
