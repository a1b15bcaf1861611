/**
 * Reading model responses: probes, the final SQL and the unanswerable convention, tolerant of every
 * built-in profile's response format (src/agent/profiles), plus the strict template check used by the training format reward.
 *
 * Precedence for the final SQL (the last one counts within a tier):
 *  1. `<final_sql>` / `<answer>` blocks (closed, or left open at the end of the text);
 *  2. SQL outside every tag: fenced ```sql blocks, `…SQL query is: "…"` sentences, or a response
 *     that is nothing but a query;
 *  3. only when 1–2 find nothing: the same inside `<think>` / `<reasoning>` blocks.
 * `<intermediate_sql>` (probes) and `<result>` (server feedback) never supply the final SQL. An
 * answer (or, without one, the text outside tags) reading `UNANSWERABLE: reason` declares the
 * question unanswerable.
 */
import { lexSql } from "../sql/index.js";
import { UNANSWERABLE_MARKER } from "./prompts.js";
import { REEX_SYNTAX, type ResponseSyntax, type TagRole } from "./syntax.js";
import type { PromptFamily } from "./types.js";

/** A tag's name without brackets (`think`, `intermediate_sql`, `sql`, …); which names a parse knows comes from its {@link ResponseSyntax}. */
export type TagName = string;

const tagPatterns = new WeakMap<ResponseSyntax, RegExp>();

/** The opening-or-closing tag pattern of a syntax (source only; callers make their own stateful copy). */
function tagPattern(syntax: ResponseSyntax): RegExp {
  let re = tagPatterns.get(syntax);
  if (!re) {
    const names = Object.keys(syntax.tags).map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    re = new RegExp(`<(/?)(${names.join("|")})>`, "gi");
    tagPatterns.set(syntax, re);
  }
  return re;
}
const SQL_START_RE = /^\s*(?:select|with)\b/i;
const QUOTED_SQL_RE = /^["'`]\s*(?:select|with)\b/i;
/** A query starting inside prose: `SELECT` or a CTE's `WITH name AS (`, after a space, colon or quote. */
const SQL_IN_PROSE_RE = /(?:^|[\s:])((?:["'`]\s*)?(?:select\b|with\s+(?:recursive\s+)?\w+\s+as\s*\())/i;

/** One top-level piece of a response: a tagged block, or text between blocks. */
export interface Segment {
  /** The tag's name (lower case), or "text". */
  kind: TagName | "text";
  /** The tag's role in the syntax it was read with; "text" for text. */
  role: TagRole | "text";
  /** The block's content (without its tags), or the text itself. */
  content: string;
  /** False for a block whose closing tag never came (it runs to the end of the text). */
  closed: boolean;
  /** Offsets of the whole piece (tags included) in the text. */
  start: number;
  end: number;
}

const asciiLower = (code: number): number => (code >= 65 && code <= 90 ? code + 32 : code);

/**
 * Where `needle` (a tag: ASCII) first occurs in `text` at or after `from`, ignoring ASCII case
 * only, as an offset into `text` itself; -1 when it does not. Lower-casing the whole text instead
 * would shift offsets wherever a character's lower case has another length (İ, ẞ).
 */
export function indexOfTag(text: string, needle: string, from = 0): number {
  const n = needle.length;
  outer: for (let i = Math.max(0, from); i + n <= text.length; i++) {
    for (let j = 0; j < n; j++) {
      if (asciiLower(text.charCodeAt(i + j)) !== asciiLower(needle.charCodeAt(j))) continue outer;
    }
    return i;
  }
  return -1;
}

/**
 * Splits a response into top-level blocks and text; a block's content is opaque up to its own
 * closing tag, except that an unclosed reasoning block ends (unclosed) where a probe or final tag
 * opens, as small models write them. Only the syntax's tags are blocks. Default syntax: the ReEx tags.
 */
export function segments(text: string, syntax: ResponseSyntax = REEX_SYNTAX): Segment[] {
  const out: Segment[] = [];
  let pos = 0;
  const pushText = (end: number): void => {
    if (end > pos) out.push({ kind: "text", role: "text", content: text.slice(pos, end), closed: true, start: pos, end });
  };
  for (let open = nextOpening(text, pos, syntax); open; open = nextOpening(text, pos, syntax)) {
    pushText(open.index);
    const contentStart = open.index + open.length;
    const closeTag = `</${open.tag}>`;
    const closeAt = indexOfTag(text, closeTag, contentStart);
    const role = syntax.tags[open.tag]!;
    const cut = closeAt < 0 && isReasoning(role) ? nextAnswering(text, contentStart, syntax) : -1;
    if (cut >= 0) {
      out.push({ kind: open.tag, role, content: text.slice(contentStart, cut), closed: false, start: open.index, end: cut });
      pos = cut;
      continue;
    }
    if (closeAt < 0) {
      out.push({ kind: open.tag, role, content: text.slice(contentStart), closed: false, start: open.index, end: text.length });
      pos = text.length;
      break;
    }
    const end = closeAt + closeTag.length;
    out.push({ kind: open.tag, role, content: text.slice(contentStart, closeAt), closed: true, start: open.index, end });
    pos = end;
  }
  pushText(text.length);
  return out;
}

function isReasoning(role: TagRole): boolean {
  return role === "think" || role === "think-alias";
}

/** Where the first probe or final tag opens at or after `from`; -1 when none does. */
function nextAnswering(text: string, from: number, syntax: ResponseSyntax): number {
  for (let open = nextOpening(text, from, syntax); open; open = nextOpening(text, open.index + open.length, syntax)) {
    const role = syntax.tags[open.tag]!;
    if (role === "probe" || role === "final" || role === "final-alias") return open.index;
  }
  return -1;
}

function nextOpening(text: string, from: number, syntax: ResponseSyntax): { index: number; length: number; tag: TagName } | null {
  const re = new RegExp(tagPattern(syntax).source, "gi");
  re.lastIndex = from;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m[1] === "") return { index: m.index, length: m[0].length, tag: m[2]!.toLowerCase() as TagName };
  }
  return null;
}

/** Removes trailing semicolons and surrounding whitespace. */
export function stripSemicolons(sql: string): string {
  return sql.replace(/[\s;]+$/, "").trim();
}

/**
 * The SQL inside a tag's content or a loose snippet: takes the last fenced block if any, drops a
 * leading sentence ending in ":" ("The final SQL query is:"), unwraps quotes, strips trailing ";".
 */
export function unwrapSql(raw: string): string {
  let s = raw.trim();
  const fenced = lastFence(s);
  if (fenced !== null) s = fenced.trim();
  if (!SQL_START_RE.test(s)) {
    const sentence = /^([^\n]*?):\s*/.exec(s);
    const rest = sentence ? s.slice(sentence[0].length) : "";
    if (sentence && !/\b(?:select|from|where)\b/i.test(sentence[1]!) && (SQL_START_RE.test(rest) || QUOTED_SQL_RE.test(rest))) {
      s = rest;
    } else if (!QUOTED_SQL_RE.test(s)) {
      const start = SQL_IN_PROSE_RE.exec(s);
      if (start) s = s.slice(start.index + start[0].length - start[1]!.length);
    }
  }
  return stripSemicolons(unquote(s));
}

function unquote(s: string): string {
  const q = s[0];
  if ((q !== '"' && q !== "'" && q !== "`") || !SQL_START_RE.test(s.slice(1))) return s;
  const last = s.lastIndexOf(q);
  return last > 0 ? s.slice(1, last).trim() : s.slice(1).trim();
}

function fences(s: string): { index: number; body: string }[] {
  const out: { index: number; body: string }[] = [];
  const re = /```[ \t]*([A-Za-z]*)[ \t]*\n?([\s\S]*?)(?:```|$)/g;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    const lang = m[1]!.toLowerCase();
    const body = m[2]!;
    if (lang === "sql" || lang === "sqlite" || (lang === "" && SQL_START_RE.test(body))) out.push({ index: m.index, body });
    if (m[0].length === 0) re.lastIndex++;
  }
  return out;
}

function lastFence(s: string): string | null {
  const all = fences(s);
  return all.length ? all[all.length - 1]!.body : null;
}

/** SQL found in free text: fenced blocks, quoted queries after "…query is:", or text that is only a query. Position order. */
function looseSql(text: string): { index: number; sql: string }[] {
  const found: { index: number; sql: string }[] = fences(text).map((f) => ({ index: f.index, sql: unwrapSql(f.body) }));
  const outside = text.replace(/```[\s\S]*?(?:```|$)/g, (m) => " ".repeat(m.length));
  const sentence = /\b(?:sql|query)\b[^\n:"'`]{0,40}:\s*(["'`]?)\s*(?=(?:select|with)\b)/gi;
  for (const m of outside.matchAll(sentence)) {
    const rest = outside.slice(m.index + m[0].length);
    const para = rest.search(/\n\s*\n/);
    let sql = para < 0 ? rest : rest.slice(0, para);
    const quote = m[1]!;
    if (quote) {
      const close = sql.lastIndexOf(quote);
      if (close >= 0) sql = sql.slice(0, close);
    }
    found.push({ index: m.index, sql: stripSemicolons(sql) });
  }
  if (found.length === 0 && SQL_START_RE.test(outside)) found.push({ index: 0, sql: stripSemicolons(outside) });
  return found.filter((f) => f.sql.length > 0).sort((a, b) => a.index - b.index);
}

/** The outcome of reading a response's answer. */
export interface FinalAnswer {
  /** The final SQL without trailing semicolons; null when none was found or the model declared the question unanswerable. */
  sql: string | null;
  /** False when the answer uses the UNANSWERABLE convention. */
  answerable: boolean;
  /** The model's stated reason, when unanswerable. */
  reason?: string;
  /** Where the answer came from: the answer tag's name (`final_sql`, `answer`, `solution`, …), or "loose", "think" or "none". */
  source: string;
  /** True when the answer came from a tag with the syntax's final role or its alias. */
  fromTag: boolean;
  /** False when the answer block was never closed (cut off, or the turn ended inside it). */
  closed: boolean;
}

/** Detects `UNANSWERABLE: reason` (also "not answerable", "cannot be answered") and returns the reason, else null. */
export function unanswerableReason(content: string): string | null {
  const s = content
    .trim()
    .replace(/^```[A-Za-z]*\s*|```$/g, "")
    .trim()
    .replace(/^["'`]|["'`]$/g, "");
  const m = new RegExp(`^\\W*(?:${UNANSWERABLE_MARKER}|not answerable|cannot be answered)\\b\\s*[:\\-–—]?\\s*([\\s\\S]*)$`, "i").exec(s);
  if (!m) return null;
  return m[1]!
    .trim()
    .replace(/["'`.]+$/, "")
    .trim();
}

/**
 * Reads the final answer of a response (see the module doc for precedence; the syntax's final tags
 * play `<final_sql>`'s part); the last candidate in a tier counts. Default syntax: the ReEx tags.
 */
export function extractFinal(text: string, syntax: ResponseSyntax = REEX_SYNTAX): FinalAnswer {
  const segs = segments(text, syntax);
  const answers = segs.filter((s) => (s.role === "final" || s.role === "final-alias") && s.content.trim().length > 0);
  const last = answers[answers.length - 1];
  if (last) {
    const source = last.kind;
    const reason = unanswerableReason(last.content);
    if (reason !== null) return { sql: null, answerable: false, reason, source, fromTag: true, closed: last.closed };
    const sql = unwrapSql(last.content);
    if (sql.length > 0) return { sql, answerable: true, source, fromTag: true, closed: last.closed };
  }
  const pick = (roles: Segment["role"][], source: FinalAnswer["source"]): FinalAnswer | null => {
    let best: string | null = null;
    for (const seg of segs) {
      if (!roles.includes(seg.role)) continue;
      const found = looseSql(seg.content);
      if (found.length) best = found[found.length - 1]!.sql;
    }
    return best === null ? null : { sql: best, answerable: true, source, fromTag: false, closed: true };
  };
  const loose = pick(["text"], "loose");
  if (loose) return loose;
  const outside = segs
    .filter((s) => s.kind === "text")
    .map((s) => s.content)
    .join(" ");
  const reason = unanswerableReason(outside);
  if (reason !== null) return { sql: null, answerable: false, reason, source: "loose", fromTag: false, closed: true };
  return pick(["think", "think-alias"], "think") ?? { sql: null, answerable: true, source: "none", fromTag: false, closed: true };
}

/** The SQL of every closed probe block (`<intermediate_sql>` in the default syntax), in order. */
export function extractProbes(text: string, syntax: ResponseSyntax = REEX_SYNTAX): string[] {
  return segments(text, syntax)
    .filter((s) => s.role === "probe" && s.closed)
    .map((s) => unwrapSql(s.content));
}

/**
 * A canonical form for comparing queries (repeated probes, the exact-match reward), from
 * `lexSql`'s tokens: words and numbers lower-cased, strings and quoted names as written, one space
 * between words, none around punctuation or operators, comments and trailing semicolons dropped.
 */
export function normalizeSql(sql: string): string {
  const tokens = lexSql(sql);
  while (tokens.at(-1)?.text === ";") tokens.pop();
  let out = "";
  let spaced = false;
  for (const t of tokens) {
    const spacedToken = !(t.kind === "punct" || t.kind === "op");
    if (spaced && spacedToken) out += " ";
    out += t.kind === "word" || t.kind === "number" || t.kind === "param" ? t.text.toLowerCase() : t.text;
    spaced = spacedToken;
  }
  return out;
}

/** End-of-turn markers that may follow `</final_sql>` in a raw response. */
export const END_TOKENS: readonly string[] = ["<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end|>", "<end_of_turn>", "</s>", "<eos>"];

/** The verdict of {@link formatCheck}. */
export interface FormatVerdict {
  ok: boolean;
  /** Human-readable reasons the response fails the template (empty when ok). */
  problems: string[];
}

/**
 * Whether the whole response (injected feedback blocks included) follows the family's template in
 * the syntax's tags: execution-aware `think (probe feedback think?)* final`, standard `think final`,
 * direct `final`; tags balanced and not nested, only whitespace between blocks, nothing after the
 * final block but whitespace and end tokens, feedback only right after a probe (the model never
 * writes one); alias tags fail it. Default syntax: the ReEx tags.
 */
export function formatCheck(text: string, family: PromptFamily, syntax: ResponseSyntax = REEX_SYNTAX): FormatVerdict {
  const problems: string[] = [];
  let body = text;
  for (let changed = true; changed; ) {
    changed = false;
    const trimmed = body.trimEnd();
    for (const t of END_TOKENS) {
      if (trimmed.endsWith(t)) {
        body = trimmed.slice(0, -t.length);
        changed = true;
      }
    }
  }
  const re = new RegExp(tagPattern(syntax).source, "gi");
  let open: { tag: TagName; contentStart: number } | null = null;
  let pos = 0;
  const blocks: { tag: TagName; content: string }[] = [];
  for (let m = re.exec(body); m; m = re.exec(body)) {
    const closing = m[1] === "/";
    const tag = m[2]!.toLowerCase() as TagName;
    if (!open) {
      if (closing) {
        problems.push(`stray </${tag}>`);
        continue;
      }
      if (body.slice(pos, m.index).trim().length > 0) problems.push(`text outside tags before <${tag}>`);
      open = { tag, contentStart: m.index + m[0].length };
    } else if (closing && tag === open.tag) {
      blocks.push({ tag, content: body.slice(open.contentStart, m.index) });
      open = null;
      pos = m.index + m[0].length;
    } else {
      problems.push(`<${closing ? "/" : ""}${tag}> inside <${open.tag}>`);
    }
  }
  if (open) problems.push(`unclosed <${open.tag}>`);
  else if (body.slice(pos).trim().length > 0) problems.push(blocks.length ? "text after the last block" : "no tagged blocks");

  const code: Record<TagRole, string> = { think: "T", probe: "P", feedback: "R", final: "F", "think-alias": "x", "final-alias": "x" };
  const sequence = blocks.map((b) => code[syntax.tags[b.tag]!]).join("");
  const pattern = family === "execution-aware" ? /^T(?:PRT?)*F$/ : family === "standard" ? /^TF$/ : /^F$/;
  if (!pattern.test(sequence)) {
    const names = blocks.map((b) => b.tag).join(" → ") || "nothing";
    problems.push(`block order ${names} does not match the ${family} template`);
  }
  for (const b of blocks) {
    const role = syntax.tags[b.tag];
    if ((role === "final" || role === "probe") && b.content.trim().length === 0) problems.push(`empty <${b.tag}>`);
  }
  return { ok: problems.length === 0, problems };
}
