/**
 * Evaluation dataset loaders: BIRD (`question`, `evidence`, `SQL`, `db_id`, `difficulty`) and
 * Spider (`question`, `query`, `db_id`) JSON arrays, validated and normalised to {@link EvalItem}s
 * whose database files are resolved under a root folder.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { ReexError, issuesFrom, type Issue } from "../errors/index.js";

/** Dataset layouts the loader understands. */
export type DatasetLayout = "bird" | "spider";

/** One evaluation question, normalised across layouts. */
export interface EvalItem {
  /** Position in the dataset file (0-based); predictions files are keyed by it. */
  index: number;
  /** BIRD's `question_id` when present, else the index. */
  questionId: number | string;
  dbId: string;
  /** Absolute path of the SQLite file. */
  dbPath: string;
  /**
   * Absolute path of the database's second row draw, where one lies beside it ({@link secondDrawPath}: the
   * same schema, its rows drawn again; real-data WikiSQL has them): EX is checked on it too. Default none.
   */
  dbPath2?: string;
  question: string;
  /** BIRD's hint; "" for Spider. */
  evidence: string;
  goldSql: string;
  /** BIRD's `simple` / `moderate` / `challenging`; absent for Spider. */
  difficulty?: string;
  /** False for a question no SQL over its database can answer (`"answerable": false`, no gold SQL; `goldSql` is then ""); absent otherwise. */
  answerable?: false;
}

const nonEmpty = z.string().trim().min(1, "must be a non-empty string");

/** A gold SQL, or null for a question marked `"answerable": false` (and only then). */
function goldField<K extends "SQL" | "query">(key: K) {
  return (item: { answerable?: false | undefined } & Partial<Record<K, string | null>>, ctx: z.RefinementCtx): void => {
    const sql = item[key];
    if (item.answerable === false && sql !== null && sql !== undefined)
      ctx.addIssue({ code: "custom", path: [key], message: 'must be null for a question marked "answerable": false' });
    if (item.answerable !== false && (sql === null || sql === undefined))
      ctx.addIssue({ code: "custom", path: [key], message: 'must be a non-empty string (null only with "answerable": false)' });
  };
}

const birdItem = z
  .looseObject({
    question_id: z.union([z.number(), z.string()]).optional(),
    db_id: nonEmpty,
    question: nonEmpty,
    evidence: z.string().optional(),
    SQL: nonEmpty.nullable(),
    difficulty: z.string().optional(),
    answerable: z.literal(false).optional(),
  })
  .superRefine(goldField("SQL"));

const spiderItem = z
  .looseObject({
    db_id: nonEmpty,
    question: nonEmpty,
    query: nonEmpty.nullable(),
    answerable: z.literal(false).optional(),
  })
  .superRefine(goldField("query"));

/** A loaded dataset: its layout and its normalised items. */
export interface Dataset {
  layout: DatasetLayout;
  items: EvalItem[];
}

/** Options of {@link parseDataset} and {@link loadDataset}. */
export interface LoadDatasetOptions {
  /** Folder holding `<db_id>/<db_id>.sqlite` (or `<db_id>.sqlite`). */
  dbRoot: string;
  /** Layout of the file; "auto" picks BIRD when the first item has `SQL`, Spider when it has `query`. Default "auto". */
  layout?: DatasetLayout | "auto";
  /** Name used in error messages. Default "dataset". */
  source?: string;
}

/**
 * Finds the SQLite file of `dbId` under `dbRoot`: `<root>/<db_id>/<db_id>.sqlite`, then
 * `<root>/<db_id>.sqlite`; null when neither is a file.
 */
export function resolveDbPath(dbRoot: string, dbId: string): string | null {
  for (const candidate of [join(dbRoot, dbId, `${dbId}.sqlite`), join(dbRoot, `${dbId}.sqlite`)]) {
    try {
      if (statSync(candidate).isFile()) return resolve(candidate);
    } catch {
      // not there: try the next layout
    }
  }
  return null;
}

/** Where a database's second row draw lies: its file with `.sqlite` replaced by `.draw2.sqlite` (`<root>/<db_id>/<db_id>.draw2.sqlite`). */
function secondDrawPath(dbPath: string): string {
  return dbPath.replace(/(\.sqlite)?$/, ".draw2.sqlite");
}

function existingSecondDraw(dbPath: string): string | undefined {
  const path = secondDrawPath(dbPath);
  try {
    return statSync(path).isFile() ? path : undefined;
  } catch {
    return undefined;
  }
}

/** Tells the layout of parsed dataset JSON from its first item; null when neither fits. */
export function detectLayout(data: unknown): DatasetLayout | null {
  if (!Array.isArray(data) || data.length === 0) return null;
  const first: unknown = data[0];
  if (typeof first !== "object" || first === null) return null;
  if ("SQL" in first) return "bird";
  if ("query" in first) return "spider";
  return null;
}

/**
 * Validates parsed dataset JSON and normalises it to {@link EvalItem}s; throws DATASET_INVALID
 * with one issue per bad field (path: item index, field) or per database file that is missing.
 */
export function parseDataset(data: unknown, options: LoadDatasetOptions): Dataset {
  const source = options.source ?? "dataset";
  if (!Array.isArray(data)) {
    throw new ReexError("DATASET_INVALID", `${source}: expected a JSON array of questions`, {
      issues: [{ path: [], message: "expected an array" }],
    });
  }
  const layout = !options.layout || options.layout === "auto" ? detectLayout(data) : options.layout;
  if (layout === null) {
    throw new ReexError("DATASET_INVALID", `${source}: cannot tell the layout: items need \`SQL\` (BIRD) or \`query\` (Spider)`, {
      issues: [{ path: data.length === 0 ? [] : [0], message: data.length === 0 ? "the dataset is empty" : "neither `SQL` nor `query` present" }],
    });
  }
  const parsed = z.array(layout === "bird" ? birdItem : spiderItem).safeParse(data);
  if (!parsed.success) {
    const issues = issuesFrom(parsed.error.issues);
    throw new ReexError("DATASET_INVALID", `${source}: ${issues.length} invalid field(s) (${layout} layout); first: ${describe(issues[0])}`, { issues });
  }

  const missing = new Map<string, number>();
  const items: EvalItem[] = [];
  const paths = new Map<string, { dbPath: string; dbPath2?: string } | null>();
  parsed.data.forEach((raw, index) => {
    const dbId = raw.db_id;
    if (!paths.has(dbId)) {
      const dbPath = resolveDbPath(options.dbRoot, dbId);
      const dbPath2 = dbPath ? existingSecondDraw(dbPath) : undefined;
      paths.set(dbId, dbPath ? { dbPath, ...(dbPath2 ? { dbPath2 } : {}) } : null);
    }
    const where = paths.get(dbId);
    if (!where) {
      if (!missing.has(dbId)) missing.set(dbId, index);
      return;
    }
    if ("SQL" in raw) {
      const bird = raw as z.infer<typeof birdItem>;
      items.push({
        index,
        questionId: bird.question_id ?? index,
        dbId,
        ...where,
        question: bird.question,
        evidence: bird.evidence ?? "",
        goldSql: bird.SQL ?? "",
        ...(bird.difficulty ? { difficulty: bird.difficulty } : {}),
        ...(bird.answerable === false ? { answerable: false as const } : {}),
      });
    } else {
      const spider = raw as z.infer<typeof spiderItem>;
      items.push({
        index,
        questionId: index,
        dbId,
        ...where,
        question: spider.question,
        evidence: "",
        goldSql: spider.query ?? "",
        ...(spider.answerable === false ? { answerable: false as const } : {}),
      });
    }
  });
  if (missing.size > 0) {
    const ids = [...missing.keys()];
    const issues: Issue[] = [...missing].map(([dbId, index]) => ({
      path: [index, "db_id"],
      message: `no database file for db_id "${dbId}" (looked for ${join(options.dbRoot, dbId, `${dbId}.sqlite`)} and ${join(options.dbRoot, `${dbId}.sqlite`)})`,
    }));
    throw new ReexError("DATASET_INVALID", `${source}: missing database file(s) for db_id ${ids.map((d) => `"${d}"`).join(", ")} under ${options.dbRoot}`, {
      issues,
      details: { missingDbIds: ids },
    });
  }
  return { layout, items };
}

/** Reads a dataset JSON file and hands it to {@link parseDataset}; a missing file or root is BAD_REQUEST, non-JSON is DATASET_INVALID. */
export function loadDataset(file: string, options: LoadDatasetOptions): Dataset {
  if (!existsSync(file)) throw new ReexError("BAD_REQUEST", `dataset file not found: ${file}`);
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new ReexError("DATASET_INVALID", `${file} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  if (!existsSync(options.dbRoot)) throw new ReexError("BAD_REQUEST", `database root not found: ${options.dbRoot}`);
  return parseDataset(data, { ...options, source: options.source ?? file });
}

function describe(issue: Issue | undefined): string {
  return issue ? `${issue.path.join(".") || "(root)"}: ${issue.message}` : "";
}

/** One parsed prediction: the question index it answers, its SQL, and the db_id BIRD's suffix names. */
export interface Prediction {
  index: number;
  sql: string;
  dbId?: string;
}

const BIRD_SUFFIX = /\t-{3,}\s*bird\s*-{3,}\t(.*)$/s;

function splitBirdSuffix(raw: string): { sql: string; dbId?: string } {
  const m = BIRD_SUFFIX.exec(raw);
  if (!m) return { sql: raw.trim() };
  return { sql: raw.slice(0, m.index).trim(), dbId: m[1]!.trim() };
}

/**
 * Parses a predictions file: one SQL per line (line i answers question i; a trailing
 * `\t----- bird -----\t<db_id>` is stripped), or JSON keyed by question index
 * (`{"0": "SELECT …"}`, BIRD's predict_dev.json) or a JSON array of SQL strings.
 */
export function parsePredictions(text: string, source = "predictions"): Prediction[] {
  const trimmed = text.trim();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    let data: unknown;
    try {
      data = JSON.parse(trimmed);
    } catch (err) {
      throw new ReexError("DATASET_INVALID", `${source}: looks like JSON but does not parse: ${(err as Error).message}`);
    }
    const entries: [string, unknown][] = Array.isArray(data) ? data.map((v, i) => [String(i), v]) : Object.entries(data as object);
    const issues: Issue[] = [];
    const out: Prediction[] = [];
    for (const [key, value] of entries) {
      if (!/^\d+$/.test(key)) issues.push({ path: [key], message: "keys must be question indexes (0, 1, …)" });
      else if (typeof value !== "string") issues.push({ path: [Number(key)], message: "expected a SQL string" });
      else out.push({ index: Number(key), ...splitBirdSuffix(value) });
    }
    if (issues.length > 0) throw new ReexError("DATASET_INVALID", `${source}: ${issues.length} invalid prediction(s)`, { issues });
    return out.sort((a, b) => a.index - b.index);
  }
  const lines = text.split(/\r?\n/);
  while (lines.length > 0 && lines[lines.length - 1]!.trim() === "") lines.pop();
  return lines.map((line, index) => ({ index, ...splitBirdSuffix(line) }));
}

/**
 * Lines predictions up with items by question index: every item needs one, none may point past
 * the dataset, and a BIRD suffix's db_id must match the item's (a misaligned file fails loudly).
 * Returns one SQL (or null for an empty line) per item, in item order.
 */
export function alignPredictions(items: readonly EvalItem[], predictions: readonly Prediction[], source = "predictions"): (string | null)[] {
  const byIndex = new Map(predictions.map((p) => [p.index, p]));
  const issues: Issue[] = [];
  const wanted = new Set(items.map((i) => i.index));
  const maxIndex = items.reduce((m, i) => Math.max(m, i.index), -1);
  for (const p of predictions) {
    if (!wanted.has(p.index) && p.index > maxIndex)
      issues.push({ path: [p.index], message: `no question ${p.index} in the dataset (${items.length} questions)` });
  }
  const aligned = items.map((item) => {
    const p = byIndex.get(item.index);
    if (!p) {
      issues.push({ path: [item.index], message: "no prediction for this question" });
      return null;
    }
    if (p.dbId !== undefined && p.dbId !== "" && p.dbId !== item.dbId) {
      issues.push({ path: [item.index, "db_id"], message: `prediction is for db_id "${p.dbId}" but question ${item.index} is on "${item.dbId}"` });
    }
    return p.sql === "" ? null : p.sql;
  });
  if (issues.length > 0) {
    throw new ReexError(
      "DATASET_INVALID",
      `${source}: ${predictions.length} prediction(s) do not line up with ${items.length} question(s); first: ${describe(issues[0])}`,
      { issues },
    );
  }
  return aligned;
}

/** Reads a predictions file ({@link parsePredictions}) and aligns it with the items ({@link alignPredictions}). */
export function loadPredictions(file: string, items: readonly EvalItem[]): (string | null)[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ReexError("BAD_REQUEST", `cannot read predictions file ${file}: ${(err as Error).message}`);
  }
  return alignPredictions(items, parsePredictions(text, file), file);
}
