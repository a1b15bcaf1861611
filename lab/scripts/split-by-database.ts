/**
 * Splits a question file (any layout `reex eval --dataset` reads, kept as-is) into two halves
 * within each database, alternating in file order: the 1st, 3rd, 5th… question of a database go to
 * `--pool` (the verified examples), the 2nd, 4th… to `--asked` (the questions evaluated). Used to
 * measure what a database's own verified examples buy (docs/teaching.md#measuring-what-examples-buy):
 *
 *   npx tsx lab/scripts/split-by-database.ts --in examples/questions.json --pool .reex/ex45/pool.json --asked .reex/ex45/asked.json
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";

const { values: v } = parseArgs({ options: { in: { type: "string" }, pool: { type: "string" }, asked: { type: "string" } } });
if (!v.in || !v.pool || !v.asked) {
  console.error("usage: split-by-database.ts --in FILE --pool OUT --asked OUT");
  process.exit(2);
}
const rows = JSON.parse(readFileSync(v.in, "utf8")) as Array<Record<string, unknown>>;
const seen = new Map<string, number>();
const pool: typeof rows = [];
const asked: typeof rows = [];
for (const row of rows) {
  const db = String(row.db_id);
  const n = seen.get(db) ?? 0;
  seen.set(db, n + 1);
  (n % 2 === 0 ? pool : asked).push(row);
}
for (const [file, part] of [
  [v.pool, pool],
  [v.asked, asked],
] as const) {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(part, null, 1)}\n`);
}
console.log(`${v.in}: ${pool.length} to ${v.pool}, ${asked.length} to ${v.asked} (${[...seen].map(([d, n]) => `${d} ${n}`).join(", ")})`);
