/**
 * Value linking: how many of the values a gold query compares are in the prompt's "Matched values"
 * (what any model, the starter or a user's, copies from), with and without reading codes
 * (`MatchOptions.codes`: "Germany" for `'DE'`, "shipped" for `'SHP'`, "EPs" for `'ep'`), side by
 * side in one run over the same questions.
 *
 *   npx tsx bench/value-linking.ts [--dataset examples/questions.json] [--db-root examples/databases] [--limit N]
 *
 * A gold value is a string literal of the gold SQL (LIKE's `%` taken off) that the database
 * stores exactly; it is found when a matched-values line holds that value (any column). Lines
 * are the prompt's (question plus evidence, at most 10). Prints, per mode, the gold values found,
 * the questions all of whose gold values were found, and matched lines per question, of them
 * holding no gold value; last, `codes found X% → Y%`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ValueIndex } from "../src/sql/index.js";

const { values } = parseArgs({
  options: {
    dataset: { type: "string", default: "examples/questions.json" },
    "db-root": { type: "string", default: "examples/databases" },
    limit: { type: "string" },
    "index-dir": { type: "string", default: "bench/.output/indexes" },
  },
});

interface Question {
  db_id: string;
  question: string;
  evidence?: string;
  SQL?: string;
  query?: string;
}

const all = JSON.parse(readFileSync(values.dataset, "utf8")) as Question[];
const questions = values.limit ? all.slice(0, Number(values.limit)) : all;

function dbFile(dbId: string): string {
  return join(values["db-root"], dbId, `${dbId}.sqlite`);
}

/** The string literals of `sql`, quotes undoubled, LIKE's `%` taken off either end. */
function stringLiterals(sql: string): string[] {
  return [...sql.matchAll(/'((?:[^']|'')*)'/g)].map((m) => m[1]!.replace(/''/g, "'").replace(/^%+|%+$/g, "")).filter((s) => s.length > 0);
}

interface Tally {
  gold: number;
  found: number;
  questions: number;
  allFound: number;
  lines: number;
  noise: number;
}

const modes = { plain: false, codes: true } as const;
const tallies: Record<keyof typeof modes, Tally> = {
  plain: { gold: 0, found: 0, questions: 0, allFound: 0, lines: 0, noise: 0 },
  codes: { gold: 0, found: 0, questions: 0, allFound: 0, lines: 0, noise: 0 },
};
const indexes = new Map<string, ValueIndex>();
let timeCodes = 0;
let timePlain = 0;
for (const q of questions) {
  const file = dbFile(q.db_id);
  let index = indexes.get(file);
  if (!index) {
    index = ValueIndex.open(file, { indexDir: values["index-dir"] });
    indexes.set(file, index);
  }
  const gold = [...new Set(stringLiterals(q.SQL ?? q.query ?? ""))].filter((lit) => index.stored(lit).some((s) => s.value === lit));
  const text = q.evidence ? `${q.question} ${q.evidence}` : q.question;
  for (const [mode, codes] of Object.entries(modes) as [keyof typeof modes, boolean][]) {
    const t0 = performance.now();
    const lines = index.match(text, { limit: 10, codes });
    const ms = performance.now() - t0;
    if (codes) timeCodes += ms;
    else timePlain += ms;
    const tally = tallies[mode];
    tally.lines += lines.length;
    tally.noise += lines.filter((l) => !gold.includes(l.value)).length;
    if (gold.length === 0) continue;
    const found = gold.filter((g) => lines.some((l) => l.value === g)).length;
    tally.gold += gold.length;
    tally.found += found;
    tally.questions += 1;
    if (found === gold.length) tally.allFound += 1;
  }
}
for (const index of indexes.values()) index.close();

const pct = (a: number, b: number): string => (b === 0 ? "n/a" : `${((100 * a) / b).toFixed(1)}%`);
console.log(`${questions.length} questions from ${values.dataset}; ${tallies.plain.questions} compare stored text values (${tallies.plain.gold} values)`);
for (const [mode, t] of Object.entries(tallies)) {
  console.log(
    `${mode.padEnd(6)} gold values found ${t.found}/${t.gold} (${pct(t.found, t.gold)}), questions with all found ${t.allFound}/${t.questions} (${pct(t.allFound, t.questions)}), lines a question ${(t.lines / questions.length).toFixed(2)}, of them no gold value ${pct(t.noise, t.lines)}`,
  );
}
console.log(`match time a question: plain ${(timePlain / questions.length).toFixed(2)} ms, codes ${(timeCodes / questions.length).toFixed(2)} ms`);
console.log(`codes found ${pct(tallies.plain.found, tallies.plain.gold)} → ${pct(tallies.codes.found, tallies.codes.gold)}`);
