/**
 * The SQL lexer: the one place reex splits SQL text into tokens (the guard, entity extraction,
 * ORDER BY detection, and src/agent's identifier check, name binding, conditions and repairs all
 * read its tokens). SQLite's lexicon: words, quoted names ("…", `…`, […]), strings ('…', quotes
 * doubled), blobs (x'…'), numbers, parameters, comments, operators and punctuation.
 *
 * Unicode as in SQLite: every character from U+0080 up may be part of a word, so `città` or `名前`
 * is one word. Unicode white space (U+00A0, U+3000, …) is skipped where a token would start, like
 * ASCII white space, unless `asciiSpace` asks for SQLite's own rule (there it is a word character).
 * Never throws: a string, quoted name, blob or block comment without its end runs to the end of the
 * text and is marked `unterminated`. Every token keeps its offsets into the text, for rewrites.
 */

/** What a token is: a bare word (keyword or name), a quoted name, a literal, a parameter, punctuation `( ) , . ;`, an operator, or a comment. */
export type SqlTokenKind = "word" | "quoted" | "string" | "blob" | "number" | "param" | "punct" | "op" | "comment";

/** One token of a SQL text, with its offsets and its parenthesis structure. */
export interface SqlToken {
  kind: SqlTokenKind;
  /** The token as written: `sql.slice(start, end)` (quotes, `x'…'` and comment markers included). */
  text: string;
  /** What it stands for: a quoted name's or a string's content (doubled quotes undone), a blob's hex digits; otherwise the text. */
  value: string;
  /** The value upper-cased, for comparing a word with keywords. */
  upper: string;
  /** Offset of its first character in the text. */
  start: number;
  /** Offset just past its last character. */
  end: number;
  /** Parentheses open around it (a parenthesis itself sits at the outer depth). */
  depth: number;
  /** For "(" and ")": the index of the matching one; -1 when unbalanced or not a parenthesis. */
  match: number;
  /** A string, quoted name, blob or block comment whose closing quote (or `*\/`) is missing: it runs to the end of the text. */
  unterminated: boolean;
}

/** How {@link lexSql} reads a text. */
export interface LexOptions {
  /** Keep comments as tokens (kind "comment"). Default false: they are dropped like white space. */
  comments?: boolean;
  /** Only ASCII white space separates tokens, as in SQLite (which takes U+00A0 and the like for word characters). Default false. */
  asciiSpace?: boolean;
}

const TWO_CHAR_OPERATORS = new Set(["||", "<=", ">=", "==", "!=", "<>", "<<", ">>", "->"]);
const PUNCTUATION = "(),.;";
const NUMBER = /0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?/y;
const UNICODE_SPACE = /\s/;

const isDigit = (c: number): boolean => c >= 48 && c <= 57;
const isWordStart = (c: number): boolean => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c >= 0x80;
const isWordPart = (c: number): boolean => isWordStart(c) || isDigit(c) || c === 36;
const isAsciiSpace = (c: number): boolean => c === 32 || (c >= 9 && c <= 13);

/** The tokens of `sql` in order, white space (and comments, unless asked for) dropped; never throws. */
export function lexSql(sql: string, options: LexOptions = {}): SqlToken[] {
  return new Lexer(sql, options).run();
}

class Lexer {
  private readonly out: SqlToken[] = [];
  private readonly open: number[] = [];
  private i = 0;

  constructor(
    private readonly sql: string,
    private readonly options: LexOptions,
  ) {}

  run(): SqlToken[] {
    const { sql } = this;
    const n = sql.length;
    while (this.i < n) {
      const c = sql.charCodeAt(this.i);
      const next = sql.charCodeAt(this.i + 1);
      if (isAsciiSpace(c) || (c >= 0x80 && !this.options.asciiSpace && UNICODE_SPACE.test(sql[this.i]!))) this.i++;
      else if (c === 45 && next === 45) this.comment(sql.indexOf("\n", this.i + 2), 0);
      else if (c === 47 && next === 42) this.comment(sql.indexOf("*/", this.i + 2), 2);
      else if (c === 39) this.quoted("string", this.i, "'", true);
      else if ((c === 120 || c === 88) && next === 39) this.quoted("blob", this.i + 1, "'", true);
      else if (c === 34 || c === 96) this.quoted("quoted", this.i, sql[this.i]!, true);
      else if (c === 91) this.quoted("quoted", this.i, "]", false);
      else if (isDigit(c) || (c === 46 && isDigit(next))) {
        NUMBER.lastIndex = this.i;
        NUMBER.test(sql);
        this.push("number", NUMBER.lastIndex);
      } else if (isWordStart(c)) this.push("word", this.skipWord(this.i + 1));
      else if (c === 63 || ((c === 58 || c === 64 || c === 36) && isWordPart(next))) this.push("param", this.skipWord(this.i + 1));
      else if (PUNCTUATION.includes(sql[this.i]!)) this.push("punct", this.i + 1);
      else this.push("op", this.i + this.operatorLength());
    }
    return this.out;
  }

  private skipWord(j: number): number {
    while (j < this.sql.length && isWordPart(this.sql.charCodeAt(j))) j++;
    return j;
  }

  private operatorLength(): number {
    const two = this.sql.slice(this.i, this.i + 2);
    if (!TWO_CHAR_OPERATORS.has(two)) return 1;
    return two === "->" && this.sql[this.i + 2] === ">" ? 3 : 2;
  }

  /** A comment from the current offset to `close` (-1: none) plus the closing marker's length. */
  private comment(close: number, marker: number): void {
    const end = close < 0 ? this.sql.length : close + marker;
    if (this.options.comments) this.push("comment", end, undefined, marker > 0 && close < 0);
    else this.i = end;
  }

  /** A token quoted from `open` (the opening quote's offset) to `close`, the closing quote doubled inside when `doubled`. */
  private quoted(kind: "string" | "blob" | "quoted", open: number, close: string, doubled: boolean): void {
    const { sql } = this;
    let value = "";
    let from = open + 1;
    for (;;) {
      const k = sql.indexOf(close, from);
      if (k < 0) return this.push(kind, sql.length, value + sql.slice(from), true);
      if (doubled && sql[k + 1] === close) {
        value += sql.slice(from, k + 1);
        from = k + 2;
        continue;
      }
      return this.push(kind, k + 1, value + sql.slice(from, k));
    }
  }

  /** Adds the token from the current offset to `end` and moves past it. */
  private push(kind: SqlTokenKind, end: number, value?: string, unterminated = false): void {
    const text = this.sql.slice(this.i, end);
    const v = value ?? text;
    const token: SqlToken = { kind, text, value: v, upper: v.toUpperCase(), start: this.i, end, depth: this.open.length, match: -1, unterminated };
    const index = this.out.length;
    if (kind === "punct" && text === "(") this.open.push(index);
    else if (kind === "punct" && text === ")") {
      const opening = this.open.pop();
      token.depth = this.open.length;
      if (opening !== undefined) {
        token.match = opening;
        this.out[opening]!.match = index;
      }
    }
    this.out.push(token);
    this.i = end;
  }
}
