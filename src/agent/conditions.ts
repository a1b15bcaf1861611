/** Conditions a query should not hold: the signal of SQL that runs but cannot mean what was asked. */
import { lexSql, type SqlToken } from "../sql/index.js";

const ARITHMETIC = new Set(["+", "-", "*", "/", "%", "|", "||"]);
const VALUE_FUNCTIONS = /^(printf|format|substr|substring|length|upper|lower|trim|abs|round)$/i;
/** A comparison operator, or a piece of one the next token may finish (`<` `=` written apart). */
const isOp = (t: SqlToken | undefined): boolean => !!t && t.kind === "op" && /^[=<>!]{1,2}$/.test(t.text);

/**
 * Why a query's conditions look wrong, or null: a column compared with itself (`a = a`), two
 * constants compared (`1 = 1`), one column held equal to two values with no OR in the query
 * (`a = 'x' AND a = 'y'`), or a comparison fed to a function as a value (`printf(a LIKE 'x%')`).
 */
export function suspectCondition(sql: string): string | null {
  const toks = lexSql(sql);
  const depth: number[] = [];
  const openers: number[] = [];
  const enclosing: number[] = [];
  for (const [i, t] of toks.entries()) {
    if (t.text === ")" && t.kind === "punct") openers.pop();
    depth.push(openers.length);
    enclosing.push(openers.at(-1) ?? -1);
    if (t.text === "(" && t.kind === "punct") openers.push(i);
  }
  const hasOr = toks.some((t) => t.kind === "word" && t.upper === "OR");
  const equals = new Map<string, Set<string>>();
  for (let i = 1; i < toks.length - 1; i++) {
    const t = toks[i]!;
    const like = t.kind === "word" && t.upper === "LIKE";
    if (!(like || (isOp(t) && !isOp(toks[i - 1])))) continue;
    const opEnd = isOp(toks[i + 1]) ? i + 1 : i;
    const op = toks
      .slice(i, opEnd + 1)
      .map((x) => x.text)
      .join("");
    const left = operand(toks, i - 1, -1);
    const right = operand(toks, opEnd + 1, 1);
    if (!left || !right) continue;
    if (ARITHMETIC.has(toks[left.outer]?.text ?? "") || ARITHMETIC.has(toks[right.outer]?.text ?? "") || toks[right.outer]?.text === "(") continue;
    if (left.column && left.key === right.key) return `${left.key} is compared with itself`;
    if (!left.column && !right.column) return "two constants are compared";
    const before = toks[left.outer];
    const joined = !before || before.text === "(" || (before.kind === "word" && ["AND", "WHERE", "ON"].includes(before.upper));
    if ((op === "=" || op === "==") && left.column && !right.column && !hasOr && joined) {
      const key = `${depth[i]}:${left.key}`;
      const values = equals.get(key) ?? new Set<string>();
      values.add(right.key);
      equals.set(key, values);
      if (values.size > 1) return `${left.key} is held equal to two values`;
    }
    const open = enclosing[i]!;
    if (open > 0 && toks[open - 1]?.kind === "word" && VALUE_FUNCTIONS.test(toks[open - 1]!.text)) return "a comparison is used as a value";
  }
  return null;
}

/** The name (`t.c`, `c`) or literal at `at`, read towards `step`; `outer` is the index of the token beyond it. */
function operand(toks: readonly SqlToken[], at: number, step: 1 | -1): { key: string; column: boolean; outer: number } | undefined {
  const t = toks[at];
  if (!t) return undefined;
  if (t.kind === "string" || t.kind === "number" || t.kind === "blob") return { key: t.text, column: false, outer: at + step };
  if (t.kind !== "word" && t.kind !== "quoted") return undefined;
  const dot = toks[at + step];
  const other = toks[at + 2 * step];
  if (dot?.text === "." && other && (other.kind === "word" || other.kind === "quoted")) {
    const [a, b] = step === 1 ? [t, other] : [other, t];
    return { key: `${a.value}.${b.value}`.toLowerCase(), column: true, outer: at + 3 * step };
  }
  return { key: t.value.toLowerCase(), column: true, outer: at + step };
}
