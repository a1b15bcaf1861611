/**
 * examples/follow-ups.json, the 20 follow-up pairs lab/scripts/follow-ups.ts measures conversations
 * with: every gold SQL runs on its example database, every follow-up names an earlier question of
 * the same database, and its answer differs from that question's (else a model that ignored the
 * follow-up would score).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { exampleDbPath } from "../../src/examples/testing.js";

interface Row {
  question_id: number;
  db_id: string;
  question: string;
  SQL: string;
  follows?: number;
}
const EXAMPLES = fileURLToPath(new URL("../../examples", import.meta.url));
const rows = JSON.parse(readFileSync(new URL("../../examples/follow-ups.json", import.meta.url), "utf8")) as Row[];

function run(db: string, sql: string): string[] {
  const handle = new Database(exampleDbPath(EXAMPLES, db), { readonly: true, fileMustExist: true });
  try {
    return handle
      .prepare(sql)
      .raw()
      .all()
      .map((r) => JSON.stringify(r));
  } finally {
    handle.close();
  }
}

describe("examples/follow-ups.json", () => {
  const byId = new Map(rows.map((r) => [r.question_id, r]));
  const followUps = rows.filter((r) => r.follows !== undefined);

  it("holds 20 pairs, each follow-up after the question it follows, on the same database", () => {
    expect(followUps).toHaveLength(20);
    for (const f of followUps) {
      const first = byId.get(f.follows!);
      expect(first, f.question).toBeDefined();
      expect(first!.db_id).toBe(f.db_id);
      expect(rows.indexOf(first!)).toBeLessThan(rows.indexOf(f));
    }
  });

  it("every gold SQL runs, and a follow-up's rows differ from its first question's", () => {
    for (const f of followUps) {
      const first = byId.get(f.follows!)!;
      const a = run(first.db_id, first.SQL);
      const b = run(f.db_id, f.SQL);
      expect(b.length, f.SQL).toBeGreaterThan(0);
      expect(b, `${first.question} → ${f.question}`).not.toEqual(a);
    }
  });
});
