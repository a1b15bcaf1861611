import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { makeApp, sqliteBytes, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

async function listening(): Promise<{ t: TestApp; url: string }> {
  t = await makeApp();
  const url = await t.app.listen({ host: "127.0.0.1", port: 0 });
  return { t, url };
}

describe("uploads over a real port", () => {
  it("answers curl's default content type with 415 UNSUPPORTED_MEDIA_TYPE naming the accepted types", async () => {
    const { t, url } = await listening();
    // what `curl --data-binary @file.sqlite URL` sends without -H
    const res = await fetch(`${url}/v1/databases?name=shop`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: sqliteBytes(t.dir),
    });
    expect(res.status).toBe(415);
    const body = (await res.json()) as { code: string; message: string; details: { accepted: string[] } };
    expect(body.code).toBe("UNSUPPORTED_MEDIA_TYPE");
    expect(body.message).toContain("application/x-www-form-urlencoded");
    expect(body.message).toContain("application/octet-stream");
    expect(body.details.accepted).toEqual(expect.arrayContaining(["application/json", "application/octet-stream", "application/vnd.sqlite3"]));
  });

  it("keeps the first name working when the same bytes are uploaded again under another name", async () => {
    const { t, url } = await listening();
    const bytes = sqliteBytes(t.dir);
    const up = async (name?: string): Promise<{ id: string; name: string }> => {
      const res = await fetch(`${url}/v1/databases${name ? `?name=${name}` : ""}`, {
        method: "POST",
        headers: { "content-type": "application/octet-stream" },
        body: bytes,
      });
      expect(res.status).toBe(201);
      return (await res.json()) as { id: string; name: string };
    };
    const first = await up("shop");
    const second = await up("store");
    expect(second.id).not.toBe(first.id);
    expect(second.name).toBe("store");
    for (const name of ["shop", "store"]) {
      const res = await fetch(`${url}/v1/sql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ database: name, question: "How many singers?" }),
      });
      expect(res.status, name).toBe(200);
    }
    // the same bytes again, unnamed or under their name, are the same entry
    expect((await up()).id).toBe(first.id);
    expect((await up("shop")).id).toBe(first.id);
    const list = (await (await fetch(`${url}/v1/databases`)).json()) as { databases: { name: string }[] };
    expect(list.databases.map((d) => d.name).sort()).toEqual(["shared", "shop", "store"]);
  });

  it("says so when an uploaded database has no tables", async () => {
    const { t, url } = await listening();
    const dir = mkdtempSync(join(tmpdir(), "reex-empty-"));
    try {
      const path = join(dir, "empty.sqlite");
      const db = new Database(path);
      db.pragma("user_version = 1");
      db.close();
      const res = await fetch(`${url}/v1/databases?name=empty`, {
        method: "POST",
        headers: { "content-type": "application/vnd.sqlite3" },
        body: (await import("node:fs")).readFileSync(path),
      });
      expect(res.status).toBe(201);
      const body = (await res.json()) as { tables: string[]; warning?: string };
      expect(body.tables).toEqual([]);
      expect(body.warning).toMatch(/no tables/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    void t;
  });
});
