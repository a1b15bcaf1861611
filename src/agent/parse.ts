/**
 * Reading model responses: probes, the final SQL and the unanswerable convention, tolerant of every
 * response format in SPEC §2, plus the strict template check used by the training format reward.
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
import { UNANSWERABLE_MARKER } from "./prompts.js";
import type { PromptFamily } from "../decoding/types.js";

/** Tags the parser knows; the last two belong to the Think2SQL / CogniSQL / SQL-R1 formats. */
export type TagName = "think" | "intermediate_sql" | "result" | "final_sql" | "reasoning" | "answer";

const TAGS: readonly TagName[] = ["think", "intermediate_sql", "result", "final_sql", "reasoning", "answer"];
const TAG_RE = new RegExp(`<(/?)(${TAGS.join("|")})>`, "gi");
const SQL_START_RE = /^\s*(?:select|with)\b/i;
const QUOTED_SQL_RE = /^["'`]\s*(?:select|with)\b/i;
/** A query starting inside prose: `SELECT` or a CTE's `WITH name AS (`, after a space, colon or quote. */
const SQL_IN_PROSE_RE = /(?:^|[\s:])((?:["'`]\s*)?(?:select\b|with\s+(?:recursive\s+)?\w+\s+as\s*\())/i;

/** One top-level piece of a response: a tagged block, or text between blocks. */
export interface Segment {
  kind: TagName | "text";
  /** The block's content (without its tags), or the text itself. */
  content: string;
  /** False for a block whose closing tag never came (it runs to the end of the text). */
  closed: boolean;
  /** Offsets of the whole piece (tags included) in the text. */
  start: number;
  end: number;
}

/** Splits a response into top-level blocks and text; a block's content is opaque up to its own closing tag. */
export function segments(text: string): Segment[] {
  const out: Segment[] = [];
  const lower = text.toLowerCase();
  let pos = 0;
  const pushText = (end: number): void => {
    if (end > pos) out.push({ kind: "text", content: text.slice(pos, end), closed: true, start: pos, end });
  };
  for (let open = nextOpening(text, pos); open; open = nextOpening(text, pos)) {
    pushText(open.index);
    const contentStart = open.index + open.length;
    const closeTag = `</${open.tag}>`;
    const closeAt = lower.indexOf(closeTag, contentStart);
    if (closeAt < 0) {
      out.push({ kind: open.tag, content: text.slice(contentStart), closed: false, start: open.index, end: text.length });
      pos = text.length;
      break;
    }
    const end = closeAt + closeTag.length;
    out.push({ kind: open.tag, content: text.slice(contentStart, closeAt), closed: true, start: open.index, end });
    pos = end;
  }
  pushText(text.length);
  return out;
}

function nextOpening(text: string, from: number): { index: number; length: number; tag: TagName } | null {
  const re = new RegExp(TAG_RE.source, "gi");
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
  /** Where the answer came from. */
  source: "final_sql" | "answer" | "loose" | "think" | "none";
  /** False when the answer block was never closed (cut off, or the turn ended inside it). */
  closed: boolean;
}

/** Detects `UNANSWERABLE: reason` (also "not answerable", "cannot be answered") and returns the reason, else null. */
export function unanswerableReason(content: string): string | null {
  const s = content.trim().replace(/^```[A-Za-z]*\s*|```$/g, "").trim().replace(/^["'`]|["'`]$/g, "");
  const m = new RegExp(`^\\W*(?:${UNANSWERABLE_MARKER}|not answerable|cannot be answered)\\b\\s*[:\\-–—]?\\s*([\\s\\S]*)$`, "i").exec(s);
  if (!m) return null;
  return m[1]!.trim().replace(/["'`.]+$/, "").trim();
}

/** Reads the final answer of a response (see the module doc for precedence); the last candidate in a tier counts. */
export function extractFinal(text: string): FinalAnswer {
  const segs = segments(text);
  const answers = segs.filter((s) => (s.kind === "final_sql" || s.kind === "answer") && s.content.trim().length > 0);
  const last = answers[answers.length - 1];
  if (last) {
    const source = last.kind === "answer" ? "answer" : "final_sql";
    const reason = unanswerableReason(last.content);
    if (reason !== null) return { sql: null, answerable: false, reason, source, closed: last.closed };
    const sql = unwrapSql(last.content);
    if (sql.length > 0) return { sql, answerable: true, source, closed: last.closed };
  }
  const pick = (kinds: Segment["kind"][], source: FinalAnswer["source"]): FinalAnswer | null => {
    let best: string | null = null;
    for (const seg of segs) {
      if (!kinds.includes(seg.kind)) continue;
      const found = looseSql(seg.content);
      if (found.length) best = found[found.length - 1]!.sql;
    }
    return best === null ? null : { sql: best, answerable: true, source, closed: true };
  };
  const loose = pick(["text"], "loose");
  if (loose) return loose;
  const outside = segs.filter((s) => s.kind === "text").map((s) => s.content).join(" ");
  const reason = unanswerableReason(outside);
  if (reason !== null) return { sql: null, answerable: false, reason, source: "loose", closed: true };
  return pick(["think", "reasoning"], "think") ?? { sql: null, answerable: true, source: "none", closed: true };
}

/** The SQL of every closed `<intermediate_sql>` block, in order. */
export function extractProbes(text: string): string[] {
  return segments(text)
    .filter((s) => s.kind === "intermediate_sql" && s.closed)
    .map((s) => unwrapSql(s.content));
}

/**
 * A canonical form for comparing queries (repeated-probe detection): whitespace collapsed, case
 * folded outside quotes, spaces around punctuation and trailing semicolons dropped.
 */
export function normalizeSql(sql: string): string {
  const parts = stripSemicolons(sql).split(/('(?:[^']|'')*'|"(?:[^"]|"")*"|`[^`]*`|\[[^\]]*\])/);
  return parts
    .map((part, i) => {
      if (i % 2 === 1) return part;
      return part
        .toLowerCase()
        .replace(/\s+/g, " ")
        .replace(/ ?([(),=<>!+\-*/|.%]) ?/g, "$1");
    })
    .join("")
    .trim();
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
 * Whether the whole response (injected `<result>` blocks included) follows the family's template:
 * execution-aware `think (probe result think?)* final`, standard `think final`, direct `final`;
 * tags balanced and not nested, only whitespace between blocks, nothing after `</final_sql>` but
 * whitespace and end tokens, a `<result>` only right after a probe (the model never writes one).
 */
export function formatCheck(text: string, family: PromptFamily): FormatVerdict {
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
  const re = new RegExp(TAG_RE.source, "gi");
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

  const code: Record<TagName, string> = { think: "T", intermediate_sql: "P", result: "R", final_sql: "F", reasoning: "x", answer: "x" };
  const sequence = blocks.map((b) => code[b.tag]).join("");
  const pattern = family === "execution-aware" ? /^T(?:PRT?)*F$/ : family === "standard" ? /^TF$/ : /^F$/;
  if (!pattern.test(sequence)) {
    const names = blocks.map((b) => b.tag).join(" → ") || "nothing";
    problems.push(`block order ${names} does not match the ${family} template`);
  }
  for (const b of blocks) {
    if ((b.tag === "final_sql" || b.tag === "intermediate_sql") && b.content.trim().length === 0) problems.push(`empty <${b.tag}>`);
  }
  return { ok: problems.length === 0, problems };
}
