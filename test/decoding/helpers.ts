/**
 * Fixtures of the decoding tests: an in-memory executor, a fixed prompt, event capture, scripts
 * that answer by trajectory state, and the fixed-choice grammars that give the random tiny model
 * a probe-then-answer structure over a small SQLite database.
 */
import Database from "better-sqlite3";
import { normalizeSql, type BuiltPrompt, type SegmentGrammars } from "../../src/agent/index.js";
import type { ReexEvent } from "../../src/events/index.js";
import { gbnfLiteral } from "../../src/policy/tooling.js";
import { type ScriptContext } from "../../src/policy/testing.js";
import type { ExecResult, ExecuteOptions, Executor, SqlValue } from "../../src/sql/types.js";

/** A successful execution returning `values` as its rows (columns c0, c1, …). */
export function rows(...values: SqlValue[][]): ExecResult {
  const cols = values[0]?.map((_, i) => `c${i}`) ?? ["c0"];
  return { ok: true, columns: cols, rows: values, rowCount: values.length, truncated: false, empty: values.length === 0, elapsedMs: 1 };
}

/** A failed execution with a syntax error. */
export function sqlError(message = 'near "nope": syntax error'): ExecResult {
  return { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message }, elapsedMs: 1 };
}

/** An executor answering from a table of SQL → result (unknown SQL: no such column); counts calls. */
export class FakeExecutor implements Executor {
  readonly executed: string[] = [];

  constructor(
    private readonly answers: Record<string, ExecResult>,
    private readonly delayMs = 0,
  ) {}

  async execute(_db: string, sql: string, options: ExecuteOptions = {}): Promise<ExecResult> {
    this.executed.push(sql);
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
    if (options.signal?.aborted) return { ok: false, error: { code: "CANCELLED", category: "timeout", message: "aborted" }, elapsedMs: 0 };
    const key = normalizeSql(sql);
    const hit = Object.entries(this.answers).find(([k]) => normalizeSql(k) === key);
    return hit ? hit[1] : { ok: false, error: { code: "SQL_NO_SUCH_COLUMN", category: "missing_column", message: `no such column in ${sql}` }, elapsedMs: 1 };
  }

  async close(): Promise<void> {}
}

/** A prompt that needs no database. */
export const FIXED_PROMPT: BuiltPrompt = {
  messages: [
    { role: "system", content: "You are an experienced database expert." },
    { role: "user", content: "Database schema:\nt.a (INTEGER)\n\nQuestion: how many?" },
  ],
  sharedPrefix: "Database schema:\nt.a (INTEGER)\n\n",
};

/** Collects every event of a decode. */
export function eventLog(): {
  events: ReexEvent[];
  sink: (e: ReexEvent) => void;
  of: <T extends ReexEvent["type"]>(type: T) => Extract<ReexEvent, { type: T }>[];
} {
  const events: ReexEvent[] = [];
  return {
    events,
    sink: (e) => events.push(e),
    of: (type) => events.filter((e) => e.type === type) as never,
  };
}

/**
 * A script that answers by trajectory state: `decide(text, occurrence)` gets the response so far and
 * how many earlier generate calls started from that same text (so the n-th sibling of a fork can
 * answer differently from the first).
 */
export function byState(decide: (text: string, occurrence: number, ctx: ScriptContext) => string): (ctx: ScriptContext) => string {
  const seen = new Map<string, number>();
  return (ctx) => {
    const n = seen.get(ctx.text) ?? 0;
    seen.set(ctx.text, n + 1);
    return decide(ctx.text, n, ctx);
  };
}

/** `<think>…</think><intermediate_sql>sql</intermediate_sql>`. */
export const probe = (sql: string, thought = "check"): string => `<think>${thought}</think><intermediate_sql>${sql}</intermediate_sql>`;
/** `<think>…</think><final_sql>sql</final_sql>`. */
export const final = (sql: string, thought = "done"): string => `<think>${thought}</think><final_sql>${sql}</final_sql>`;
/** Number of `<result>` blocks in a response: the probes answered so far. */
export const probesIn = (text: string): number => (text.match(/<\/result>/g) ?? []).length;

/** Words the fixed-choice grammars think in. */
const THINK_WORDS = ["count", "rows", "check", "the", "table", "name", "city", "total", "order", "value"];

/**
 * Segment grammars that allow only a short think, then one of `probes` or `finals` (the first
 * segment must probe), so that a random model produces well-formed, executable trajectories.
 */
export function choiceGrammars(probes: string[], finals: string[], options: { words?: string[]; maxWords?: number } = {}): SegmentGrammars {
  const alt = (xs: string[]): string => xs.map(gbnfLiteral).join(" | ");
  const rules = [
    `think ::= "<think>" word (" " word){0,${(options.maxWords ?? 4) - 1}} "</think>"`,
    `word ::= ${alt(options.words ?? THINK_WORDS)}`,
    `probe ::= "<intermediate_sql>" probe-sql "</intermediate_sql>"`,
    `probe-sql ::= ${alt(probes)}`,
    `final ::= "<final_sql>" final-sql "</final_sql>"`,
    `final-sql ::= ${alt(finals)}`,
  ].join("\n");
  return {
    first: `root ::= think probe\n${rules}\n`,
    segment: `root ::= think (probe | final)\n${rules}\n`,
    finalBody: `root ::= final-sql "</final_sql>"\n${rules}\n`,
  };
}

/** Writes a small shop database (customers, orders) like the example databases. */
export function makeShopDb(path: string): string {
  const db = new Database(path);
  db.exec(`
    CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, segment TEXT);
    CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), total_cents INTEGER, status TEXT, placed_at TEXT);
  `);
  const cities = ["Lyon", "Porto", "Graz", "Turku"];
  const insertC = db.prepare("INSERT INTO customers VALUES (?, ?, ?, ?)");
  const insertO = db.prepare("INSERT INTO orders VALUES (?, ?, ?, ?, ?)");
  db.transaction(() => {
    for (let i = 1; i <= 20; i++) insertC.run(i, `Customer ${i}`, cities[i % 4], i % 3 === 0 ? "B2B" : "retail");
    for (let i = 1; i <= 60; i++) insertO.run(i, (i % 20) + 1, 500 + ((i * 37) % 900), i % 5 === 0 ? "RFD" : "SHP", `2024-0${(i % 9) + 1}-1${i % 10}`);
  })();
  db.close();
  return path;
}

/** Probes over the shop database: two that agree, one other, one that fails. */
export const SHOP_PROBES = [
  "SELECT COUNT(*) FROM customers WHERE city = 'Lyon'",
  "SELECT COUNT(id) FROM customers WHERE city = 'Lyon'",
  "SELECT DISTINCT city FROM customers",
  "SELECT town FROM customers",
];

/** Final answers over the shop database: two that agree, one other, one that fails. */
export const SHOP_FINALS = [
  "SELECT COUNT(*) FROM customers WHERE city = 'Lyon'",
  "SELECT COUNT(id) FROM customers WHERE city = 'Lyon'",
  "SELECT COUNT(*) FROM customers",
  "SELECT COUNT(*) FROM clients",
];
