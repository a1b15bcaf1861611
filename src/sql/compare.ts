/**
 * Execution-accuracy (EX) rules over result rows (BIRD, Spider test-suite, Think2SQL refined) and the canonical result key used for
 * voting. All comparisons share one value normalisation, implemented by {@link cellKey}:
 *
 * - NULL equals NULL.
 * - Numbers compare by value, whatever their storage: 1, 1.0 and 1n are equal.
 * - Non-integer floats are rounded to 10 significant digits first, so results that differ only by
 *   floating-point evaluation order (AVG vs SUM/COUNT) are equal; a float that rounds to an integer
 *   equals that integer.
 * - A number never equals a string, even a numeric one (BIRD compares Python values: 1 != '1').
 * - Strings compare exactly (case-sensitive); BLOBs compare by bytes.
 */
import { lexSql, type SqlToken } from "./lexer.js";
import type { SqlValue } from "./types.js";

/** Result rows as the executor returns them: one array of cells per row. */
export type ResultRows = ReadonlyArray<ReadonlyArray<SqlValue>>;

const FLOAT_DIGITS = 10;

/** Canonical string of one cell under the module's normalisation: equal keys ⇔ equal values. */
export function cellKey(value: SqlValue): string {
  if (value === null) return "N";
  if (typeof value === "bigint") return `I${value}`;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return `F${value}`;
    if (Number.isInteger(value)) return `I${BigInt(value)}`;
    const rounded = Number(value.toPrecision(FLOAT_DIGITS));
    return Number.isInteger(rounded) ? `I${BigInt(rounded)}` : `F${rounded}`;
  }
  if (typeof value === "string") return `S${value}`;
  return `B${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex")}`;
}

function rowKey(row: ReadonlyArray<SqlValue>): string {
  return JSON.stringify(row.map(cellKey));
}

/** BIRD EX: the rows as sets of tuples are equal (order and duplicates ignored, column order matters). */
export function exBird(pred: ResultRows, gold: ResultRows): boolean {
  const a = new Set(pred.map(rowKey));
  const b = new Set(gold.map(rowKey));
  if (a.size !== b.size) return false;
  for (const k of a) if (!b.has(k)) return false;
  return true;
}

/**
 * Spider test-suite EX: bag (multiset) semantics, any permutation of the predicted columns may
 * match the gold columns, row order matters only with `orderMatters` (set it when
 * {@link hasOrderBy} of the gold SQL is true). Default orderMatters false.
 */
export function exSpider(pred: ResultRows, gold: ResultRows, options: { orderMatters?: boolean } = {}): boolean {
  const orderMatters = options.orderMatters ?? false;
  if (pred.length === 0 && gold.length === 0) return true;
  if (pred.length !== gold.length) return false;
  const width = gold[0]!.length;
  if (pred.some((r) => r.length !== width) || gold.some((r) => r.length !== width)) return false;
  if (width === 0) return true;
  const P = pred.map((r) => r.map(cellKey));
  const G = gold.map((r) => r.map(cellKey));
  const rows = P.length;

  const sortedRows = (m: string[][]): string => JSON.stringify(m.map((r) => JSON.stringify([...r].sort())).sort());
  if (sortedRows(P) !== sortedRows(G)) return false;

  const column = (m: string[][], c: number): string[] => m.map((r) => r[c]!);
  const signature = (values: string[]): string => JSON.stringify([...values].sort());
  // Identical predicted columns are interchangeable: try each class once, with its multiplicity.
  const classes: { cols: number[]; signature: string; vector: string }[] = [];
  for (let c = 0; c < width; c++) {
    const values = column(P, c);
    const vector = JSON.stringify(values);
    const existing = classes.find((k) => k.vector === vector);
    if (existing) existing.cols.push(c);
    else classes.push({ cols: [c], signature: signature(values), vector });
  }
  const goldSig = Array.from({ length: width }, (_, c) => signature(column(G, c)));
  const candidates = goldSig.map((sig) => classes.filter((k) => k.signature === sig));
  if (candidates.some((c) => c.length === 0)) return false;
  const orderOfGold = Array.from({ length: width }, (_, c) => c).sort((a, b) => candidates[a]!.length - candidates[b]!.length);

  const used = new Map<(typeof classes)[number], number>();
  const assigned: { gold: number; pred: number }[] = [];

  const consistent = (): boolean => {
    if (orderMatters) {
      const last = assigned[assigned.length - 1]!;
      for (let r = 0; r < rows; r++) if (P[r]![last.pred] !== G[r]![last.gold]) return false;
      return true;
    }
    const bag = new Map<string, number>();
    for (let r = 0; r < rows; r++) {
      const k = JSON.stringify(assigned.map((a) => G[r]![a.gold]));
      bag.set(k, (bag.get(k) ?? 0) + 1);
    }
    for (let r = 0; r < rows; r++) {
      const k = JSON.stringify(assigned.map((a) => P[r]![a.pred]));
      const n = bag.get(k);
      if (!n) return false;
      bag.set(k, n - 1);
    }
    return true;
  };

  const search = (depth: number): boolean => {
    if (depth === width) return true;
    const g = orderOfGold[depth]!;
    for (const k of candidates[g]!) {
      const n = used.get(k) ?? 0;
      if (n >= k.cols.length) continue;
      used.set(k, n + 1);
      assigned.push({ gold: g, pred: k.cols[n]! });
      if (consistent() && search(depth + 1)) return true;
      assigned.pop();
      used.set(k, n);
    }
    return false;
  };
  return search(0);
}

/** Think2SQL refined EX: same row count, values sorted within each row, rows sorted, then equal. */
export function exRefined(pred: ResultRows, gold: ResultRows): boolean {
  if (pred.length !== gold.length) return false;
  const norm = (rows: ResultRows): string[] => rows.map((r) => JSON.stringify(r.map(cellKey).sort())).sort();
  const a = norm(pred);
  const b = norm(gold);
  return a.every((k, i) => k === b[i]);
}

/**
 * Canonical key of a result for voting: equal keys ⇔ equal under {@link exBird} (set of tuples,
 * row order and duplicates ignored, column order kept).
 */
export function resultKey(rows: ResultRows): string {
  return JSON.stringify([...new Set(rows.map(rowKey))].sort());
}

/** True when the SQL has an ORDER BY at its top level (not inside subqueries, windows or strings). */
export function hasOrderBy(sql: string): boolean {
  const tokens = lexSql(sql);
  const isWord = (t: SqlToken | undefined, word: string): boolean => t?.kind === "word" && t.upper === word;
  return tokens.some((t, i) => t.depth === 0 && isWord(t, "ORDER") && isWord(tokens[i + 1], "BY"));
}
