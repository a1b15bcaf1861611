/** A Postgres source in the database registry: listed by name beside files, never persisted, never removable, no URL. */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, expect, test } from "vitest";
import { DatabaseRegistry } from "../../src/sql/index.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

test("a registered source is listed and found by name for this process only, and cannot be removed", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "reex-pg-reg-"));
  dirs.push(dataDir);
  const registry = new DatabaseRegistry({ dataDir });
  const entry = registry.registerSource({ key: "postgres:shop", name: "shop", tables: ["orders", "customers"] });
  expect(entry).toMatchObject({ id: "pg-shop", name: "shop", path: "postgres:shop", source: "postgres", tables: ["customers", "orders"] });
  expect(registry.get("shop")).toEqual(entry);
  expect(registry.get("pg-shop", "some-key")).toEqual(entry);
  expect(registry.list().map((e) => e.name)).toEqual(["shop"]);
  await expect(registry.remove("pg-shop")).rejects.toMatchObject({ code: "DB_READ_ONLY_ENTRY", message: expect.stringMatching(/PostgreSQL connection/) });
  const file = join(dataDir, "local.sqlite");
  const db = new Database(file);
  db.exec("CREATE TABLE t (a INTEGER)");
  db.close();
  await registry.registerPath(file);
  expect(registry.list().map((e) => e.name)).toEqual(["local", "shop"]);
  const saved = readFileSync(join(dataDir, "registry.json"), "utf8");
  expect(saved).toContain("local.sqlite");
  expect(saved).not.toContain("postgres");
  expect(new DatabaseRegistry({ dataDir }).list().map((e) => e.name)).toEqual(["local"]);
});
