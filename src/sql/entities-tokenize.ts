/**
 * A small SQLite tokenizer: enough structure (identifiers, literals, punctuation, matched
 * parentheses) for entity extraction and ORDER BY detection without a full parser.
 */

/** One lexical token; `match` links an opening parenthesis to its closing one and back. */
export interface SqlToken {
  kind: "ident" | "keyword" | "string" | "number" | "blob" | "param" | "punct" | "op";
  /** Source text; for identifiers the unquoted name. */
  text: string;
  /** Upper-cased text, for keyword comparisons. */
  upper: string;
  /** True for identifiers written in "double quotes", `backticks` or [brackets]. */
  quoted: boolean;
  /** Parenthesis nesting depth of the token (the parentheses themselves sit at the outer depth). */
  depth: number;
  /** Index of the matching parenthesis, for "(" and ")"; -1 when unbalanced or not a parenthesis. */
  match: number;
  start: number;
}

/** Words that are never column or table names unless quoted. */
export const SQL_KEYWORDS: ReadonlySet<string> = new Set(
  (
    "ALL AND AS ASC BETWEEN BY CASE CAST COLLATE CROSS CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP " +
    "DESC DISTINCT ELSE END ESCAPE EXCEPT EXISTS FALSE FILTER FIRST FOLLOWING FROM FULL GLOB GROUP " +
    "HAVING IN INDEXED INNER INTERSECT IS ISNULL JOIN LAST LEFT LIKE LIMIT MATCH MATERIALIZED NATURAL " +
    "NOT NOTNULL NULL NULLS OFFSET ON OR ORDER OUTER OVER PARTITION PRECEDING RANGE RECURSIVE REGEXP " +
    "RIGHT ROWS SELECT THEN TRUE UNBOUNDED UNION USING VALUES WHEN WHERE WINDOW WITH"
  ).split(" "),
);

const IDENT_START = /[A-Za-z_\u0080-\uffff]/;
const IDENT_PART = /[A-Za-z0-9_$\u0080-\uffff]/;

/** Splits SQL into tokens, dropping whitespace and comments; never throws (unterminated text runs to the end). */
export function tokenizeSql(sql: string): SqlToken[] {
  const out: SqlToken[] = [];
  const stack: number[] = [];
  let i = 0;
  const n = sql.length;
  const push = (kind: SqlToken["kind"], text: string, start: number, quoted = false): void => {
    const upper = text.toUpperCase();
    const k = kind === "ident" && !quoted && SQL_KEYWORDS.has(upper) ? "keyword" : kind;
    out.push({ kind: k, text, upper, quoted, depth: stack.length, match: -1, start });
  };
  const readQuoted = (close: string, doubled: boolean): string => {
    let j = i + 1;
    let text = "";
    while (j < n) {
      const c = sql[j]!;
      if (c === close) {
        if (doubled && sql[j + 1] === close) {
          text += close;
          j += 2;
          continue;
        }
        j++;
        i = j;
        return text;
      }
      text += c;
      j++;
    }
    i = n;
    return text;
  };
  while (i < n) {
    const c = sql[i]!;
    const start = i;
    if (/\s/.test(c)) {
      i++;
    } else if (c === "-" && sql[i + 1] === "-") {
      const nl = sql.indexOf("\n", i);
      i = nl < 0 ? n : nl + 1;
    } else if (c === "/" && sql[i + 1] === "*") {
      const endComment = sql.indexOf("*/", i + 2);
      i = endComment < 0 ? n : endComment + 2;
    } else if (c === "'") {
      push("string", readQuoted("'", true), start);
    } else if ((c === "x" || c === "X") && sql[i + 1] === "'") {
      i++;
      push("blob", readQuoted("'", true), start);
    } else if (c === '"') {
      push("ident", readQuoted('"', true), start, true);
    } else if (c === "`") {
      push("ident", readQuoted("`", true), start, true);
    } else if (c === "[") {
      push("ident", readQuoted("]", false), start, true);
    } else if (/[0-9]/.test(c) || (c === "." && /[0-9]/.test(sql[i + 1] ?? ""))) {
      const m = /^(0x[0-9a-fA-F]+|(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)/.exec(sql.slice(i))!;
      i += m[0].length;
      push("number", m[0], start);
    } else if (IDENT_START.test(c)) {
      let j = i + 1;
      while (j < n && IDENT_PART.test(sql[j]!)) j++;
      const text = sql.slice(i, j);
      i = j;
      push("ident", text, start);
    } else if (c === "?" || ((c === ":" || c === "@" || c === "$") && IDENT_PART.test(sql[i + 1] ?? ""))) {
      let j = i + 1;
      while (j < n && IDENT_PART.test(sql[j]!)) j++;
      const text = sql.slice(i, j);
      i = j;
      push("param", text, start);
    } else if (c === "(") {
      push("punct", c, start);
      stack.push(out.length - 1);
      i++;
    } else if (c === ")") {
      const open = stack.pop();
      push("punct", c, start);
      if (open !== undefined) {
        out[open]!.match = out.length - 1;
        out[out.length - 1]!.match = open;
      }
      i++;
    } else if (c === "," || c === "." || c === ";") {
      push("punct", c, start);
      i++;
    } else {
      const two = sql.slice(i, i + 2);
      const op = ["||", "<=", ">=", "==", "!=", "<>", "<<", ">>", "->"].includes(two) ? (sql.slice(i, i + 3) === "->>" ? "->>" : two) : c;
      i += op.length;
      push("op", op, start);
    }
  }
  return out;
}

/** True when the token is the keyword `word` (given upper-case). */
export function isKeyword(token: SqlToken | undefined, word: string): boolean {
  return token !== undefined && token.kind === "keyword" && token.upper === word;
}
