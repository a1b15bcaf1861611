/**
 * Matched values: the distinct short text values of a database, indexed once on disk in a SQLite
 * file with an FTS5 trigram table, so that words of a question (typos and case differences
 * included) find the stored values they mean, for the prompt's "Matched Values" section.
 *
 * Matching: the question is cut at punctuation into segments, and every run of 1–4 words in a
 * segment is a candidate phrase. Each phrase that neither starts nor ends with a stop word looks
 * up values equal to it (case and diacritics folded) and values sharing the most of its rarest
 * trigrams. Every value found is scored against the phrases overlapping the one that found it
 * with `1 − OSA edit distance / longer length` on folded text, and kept when the score reaches
 * the threshold. Phrases under 3 characters are not matched; under 4, only exactly. Beside
 * those, the codes a phrase stands for (./codes.ts: "Germany" for `'DE'`, "shipped" for `'SHP'`)
 * and a stored singular that a plural phrase names ("EPs" for `'ep'`), unless `codes` is false.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { basename, join } from "node:path";
import Database from "better-sqlite3";
import { fingerprintDatabase, openReadOnly, quoteIdent } from "./schema-db.js";
import { type CodeHit, type CodeReader, MAX_CODES, codeReader, fold } from "./codes.js";
import { loadSchema, promptName } from "./schema.js";

/** A stored value that a phrase of the question matched, with its similarity (0–1]. */
export interface ValueMatch {
  table: string;
  column: string;
  value: string;
  score: number;
}

/** Where and how much to index. */
export interface ValueIndexOptions {
  /** Folder of index files. Default ".reex/indexes" (the server passes `<dataDir>/indexes`). */
  indexDir?: string;
  /** Distinct values indexed per column at most. Default 50000. */
  maxValuesPerColumn?: number;
  /** Longer strings are not indexed. Default 100. */
  maxValueLength?: number;
  /**
   * Distinct values indexed per database at most (tables in schema order), which bounds the build
   * (about 5 s of work and 15 MB of file per 100,000 values on a shared 2-core machine). Default 200000.
   */
  maxValuesTotal?: number;
}

/** Options of {@link ValueIndex.match}. */
export interface MatchOptions {
  /** Matches returned at most. Default 10. */
  limit?: number;
  /** Lowest similarity kept. Default 0.6. */
  threshold?: number;
  /**
   * Also the codes a phrase stands for ("Germany" for `'DE'`, "shipped" for `'SHP'`, see
   * ./codes.ts) and values a plural phrase names in the singular ("EPs" for `'ep'`). Default true.
   */
  codes?: boolean;
}

const FORMAT_VERSION = "3";
/** Values fetched and scored per phrase at most (those sharing the most of its rarest trigrams). */
const PER_PHRASE = 50;
/** Trigram postings read per phrase at most (rarest trigrams first; the rarest is always read). */
const SCAN_CAP = 5000;
const MAX_WORDS = 4;
/** Similarity given to a stored value that a plural phrase names in the singular. */
const PLURAL_SCORE = 0.95;

const STOPWORDS = new Set(
  (
    "a an the of in on at to for from by with and or not no is are was were be been being do does did have has had " +
    "what which who whom whose when where why how many much list show give find return tell me all each every any " +
    "their there this that these those it its as than then more most less least number count total please also only " +
    "name names i you we they he she his her them our your my can could would should will"
  ).split(" "),
);

/**
 * Path of the index file for a database's current contents: `values-<database>-<version>.sqlite`,
 * the first part a hash of the path and settings, the second of the format, mtime and size.
 */
export function valueIndexFile(dbPath: string, options: ValueIndexOptions = {}): string {
  const fp = fingerprintDatabase(dbPath);
  const s = settings(options);
  return join(s.indexDir, `${indexPrefix(fp.path, s)}${shortHash([FORMAT_VERSION, fp.mtimeMs, fp.size])}.sqlite`);
}

/** The part of an index file's name that names its database and settings, whatever the version. */
function indexPrefix(path: string, s: Required<ValueIndexOptions>): string {
  return `values-${shortHash([path, s.maxValuesPerColumn, s.maxValueLength, s.maxValuesTotal])}-`;
}

function shortHash(parts: unknown[]): string {
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex").slice(0, 16);
}

/**
 * Removes the index files of `file`'s database built for earlier versions of it (a database that
 * changes would otherwise leave one per change). A reader that has one open keeps reading it (POSIX);
 * a file the system will not remove stays: it costs disk, not correctness.
 */
function removeEarlierVersions(file: string, dbPath: string, s: Required<ValueIndexOptions>): void {
  const prefix = indexPrefix(fingerprintDatabase(dbPath).path, s);
  for (const entry of readdirSync(s.indexDir)) {
    if (entry === basename(file) || !entry.startsWith(prefix) || !entry.endsWith(".sqlite")) continue;
    try {
      rmSync(join(s.indexDir, entry), { force: true });
    } catch {
      // kept
    }
  }
}

function settings(options: ValueIndexOptions): Required<ValueIndexOptions> {
  return {
    indexDir: options.indexDir ?? ".reex/indexes",
    maxValuesPerColumn: options.maxValuesPerColumn ?? 50_000,
    maxValueLength: options.maxValueLength ?? 100,
    maxValuesTotal: options.maxValuesTotal ?? 200_000,
  };
}

const NUMERIC_LOOKING = /^[-+\s\d.,:/%$€£()]+$/;

function isIndexable(value: string, maxLength: number): boolean {
  return value.length >= 1 && value.length <= maxLength && value.trim() !== "" && !(NUMERIC_LOOKING.test(value) && /\d/.test(value));
}

function affinityIsNumeric(type: string): boolean {
  const t = type.toUpperCase();
  if (t.includes("INT")) return true;
  if (/CHAR|CLOB|TEXT/.test(t)) return false;
  return /REAL|FLOA|DOUB/.test(t);
}

/** Optimal string alignment distance (Levenshtein with adjacent transpositions). */
function osaDistance(a: string, b: string): number {
  const m = a.length;
  const n = b.length;
  let prev2 = new Array<number>(n + 1).fill(0);
  let prev = Array.from({ length: n + 1 }, (_, j) => j);
  let cur = new Array<number>(n + 1).fill(0);
  for (let i = 1; i <= m; i++) {
    cur[0] = i;
    for (let j = 1; j <= n; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, prev2[j - 2]! + 1);
      cur[j] = v;
    }
    [prev2, prev, cur] = [prev, cur, prev2];
  }
  return prev[n]!;
}

/** Similarity of two folded strings: 1 − OSA distance / longer length; short strings (< 4) must be equal. */
function similarity(a: string, b: string, threshold: number): number {
  if (a === b) return 1;
  const longer = Math.max(a.length, b.length);
  if (longer < 4) return 0;
  if (Math.abs(a.length - b.length) / longer > 1 - threshold) return 0;
  return 1 - osaDistance(a, b) / longer;
}

interface Phrase {
  text: string;
  start: number;
  end: number;
  queried: boolean;
}

function phrases(question: string): Phrase[] {
  const out: Phrase[] = [];
  const seen = new Set<string>();
  let offset = 0;
  for (const segment of question.split(/[,;:?!()[\]{}"“”]+|\.(?:\s|$)/)) {
    const words = [...segment.matchAll(/[\p{L}\p{N}]+(?:['’.&-][\p{L}\p{N}]+)*/gu)].map((m) => m[0]);
    for (let i = 0; i < words.length; i++) {
      for (let k = 1; k <= MAX_WORDS && i + k <= words.length; k++) {
        const span = words.slice(i, i + k);
        const text = fold(span.join(" "));
        if (text.length < 3 || seen.has(text)) continue;
        const lower = span.map((w) => w.toLowerCase());
        if (lower.every((w) => STOPWORDS.has(w))) continue;
        if (NUMERIC_LOOKING.test(text)) continue;
        seen.add(text);
        const queried = !STOPWORDS.has(lower[0]!) && !STOPWORDS.has(lower[lower.length - 1]!);
        out.push({ text, start: offset + i, end: offset + i + k, queried });
      }
    }
    offset += words.length + 1;
  }
  return out;
}

function trigrams(text: string): string[] {
  const grams = new Set<string>();
  const chars = [...text];
  for (let i = 0; i + 3 <= chars.length; i++) grams.add(chars.slice(i, i + 3).join(""));
  return [...grams];
}

/** The indexed values of one column (ValueIndex.fewValues). */
export interface ColumnValues {
  table: string;
  column: string;
  values: string[];
}

/**
 * The value index of one database: a SQLite file under the index folder, built on first open for
 * the database's current contents (path + mtime + size) and reused afterwards. Building reads the
 * database read-only and runs synchronously.
 *
 * File layout: `cols(id, tbl, col)`, `value_rows(id, value, folded, col_id)` with an index on
 * `folded` for exact matches, the FTS5 trigram table `vals` over `folded` (external content), and
 * `grams(term, doc)`: how many values hold each trigram, to query the rarest trigrams first.
 */
export class ValueIndex {
  private readonly exact: Database.Statement;
  private readonly gram: Database.Statement;
  private readonly rowids: Database.Statement;
  private readonly fetch: Database.Statement;
  private reader: CodeReader | undefined;

  private constructor(
    private readonly db: Database.Database,
    /** Path of the index file. */
    readonly file: string,
    /** True when this open built the index (false: an existing file was reused). */
    readonly built: boolean,
  ) {
    this.exact = db.prepare("SELECT id FROM value_rows WHERE folded = ?").pluck();
    this.gram = db.prepare("SELECT doc FROM grams WHERE term = ?").pluck();
    this.rowids = db.prepare("SELECT rowid FROM vals WHERE vals MATCH ?").pluck();
    this.fetch = db.prepare(
      "SELECT d.value AS value, d.folded AS folded, c.tbl AS tbl, c.col AS col FROM value_rows d JOIN cols c ON c.id = d.col_id WHERE d.id = ?",
    );
  }

  /** Opens the index of `dbPath`, building it first when no valid file exists. Throws DB_FILE_NOT_FOUND / DB_INVALID. */
  static open(dbPath: string, options: ValueIndexOptions = {}): ValueIndex {
    const s = settings(options);
    const file = valueIndexFile(dbPath, s);
    let built = false;
    if (!existsSync(file) || !isValidIndex(file)) {
      buildIndex(dbPath, file, s);
      built = true;
    }
    return new ValueIndex(new Database(file, { readonly: true, fileMustExist: true }), file, built);
  }

  /** Opens the index of `dbPath` when a valid file exists already; undefined otherwise (nothing is built). */
  static openBuilt(dbPath: string, options: ValueIndexOptions = {}): ValueIndex | undefined {
    const file = valueIndexFile(dbPath, settings(options));
    if (!existsSync(file) || !isValidIndex(file)) return undefined;
    return new ValueIndex(new Database(file, { readonly: true, fileMustExist: true }), file, false);
  }

  /** The database's table and column names when the index was built. */
  private schemaNames(): { name: string; columns: string[] }[] {
    const names = this.db.prepare("SELECT value FROM meta WHERE key = 'names'").pluck().get() as string | undefined;
    const parsed: unknown = names ? JSON.parse(names) : [];
    return Array.isArray(parsed) ? parsed.filter((t): t is { name: string; columns: string[] } => typeof t?.name === "string" && Array.isArray(t.columns)) : [];
  }

  /** Number of indexed values. */
  get size(): number {
    return Number(this.db.prepare("SELECT value FROM meta WHERE key = 'values'").pluck().get());
  }

  /** The stored codes `text` stands for in other words (./codes.ts): `'DE'` for "Germany". */
  codes(text: string): CodeHit[] {
    this.reader ??= cachedReader(this.file, () => codeReader(this.fewValues(MAX_CODES), STOPWORDS, this.schemaNames()));
    return this.reader(fold(text));
  }

  /**
   * What `text` names that is stored under another spelling: the codes it stands for
   * ({@link codes}) and, for a plural, the singular stored as it is ("EPs" for `'ep'`).
   */
  otherwiseNamed(text: string): { table: string; column: string; value: string }[] {
    return [...this.codes(text), ...singulars(fold(text)).flatMap((s) => this.stored(s))].map(({ table, column, value }) => ({ table, column, value }));
  }

  /** Stored values whose folded text equals `text`'s (case, diacritics and spacing aside), each once. */
  spellings(text: string): string[] {
    return [...new Set(this.stored(text).map((s) => s.value))];
  }

  /** Where values folding to `text`'s folded text are stored: one entry per column and spelling. */
  stored(text: string): { table: string; column: string; value: string }[] {
    const out = new Map<string, { table: string; column: string; value: string }>();
    for (const id of this.exact.all(fold(text)) as number[]) {
      const row = this.fetch.get(id) as { value: string; tbl: string; col: string } | undefined;
      if (row) out.set(`${row.tbl}\0${row.col}\0${row.value}`, { table: row.tbl, column: row.col, value: row.value });
    }
    return [...out.values()];
  }

  /**
   * The values of each column holding at most `perColumn` distinct indexed values (codes,
   * categories), at most `total` values in all. Defaults 50, 5000.
   */
  fewValues(perColumn = 50, total = 5000): ColumnValues[] {
    const rows = this.db
      .prepare(
        "SELECT c.tbl AS tbl, c.col AS col, v.value AS value FROM value_rows v JOIN cols c ON c.id = v.col_id WHERE v.col_id IN (SELECT col_id FROM value_rows GROUP BY col_id HAVING COUNT(*) <= ?) ORDER BY v.id LIMIT ?",
      )
      .all(perColumn, total) as { tbl: string; col: string; value: string }[];
    const out = new Map<string, ColumnValues>();
    for (const r of rows) {
      const key = `${r.tbl}\0${r.col}`;
      let entry = out.get(key);
      if (!entry) out.set(key, (entry = { table: r.tbl, column: r.col, values: [] }));
      entry.values.push(r.value);
    }
    return [...out.values()];
  }

  /** Stored values that phrases of `question` match, best first, one per (table, column, value). */
  match(question: string, options: MatchOptions = {}): ValueMatch[] {
    const limit = options.limit ?? 10;
    const threshold = options.threshold ?? 0.6;
    const codes = options.codes ?? true;
    const direct: ValueMatch[] = [];
    const all = phrases(question);
    const df = new Map<string, number>();
    const docs = new Map<string, number[]>();
    const candidates = new Map<number, Phrase[]>();
    const propose = (id: number, p: Phrase): void => {
      const list = candidates.get(id);
      if (list) list.push(p);
      else candidates.set(id, [p]);
    };
    for (const p of all) {
      if (codes) direct.push(...this.codes(p.text));
      if (!p.queried) continue;
      for (const id of this.exact.all(p.text) as number[]) propose(id, p);
      // a plural names the singular a category stores ("EPs", "singles")
      if (codes) for (const v of singulars(p.text).flatMap((s) => this.stored(s))) direct.push({ ...v, score: PLURAL_SCORE });
      const grams = trigrams(p.text)
        .map((g): [string, number] => {
          if (!df.has(g)) df.set(g, Number(this.gram.get(g) ?? 0));
          return [g, df.get(g)!];
        })
        .filter(([, n]) => n > 0)
        .sort((a, b) => a[1] - b[1]);
      const hits = new Map<number, number>();
      let total = 0;
      for (const [g, n] of grams) {
        if (total > 0 && total + n > SCAN_CAP) break;
        total += n;
        let ids = docs.get(g);
        if (!ids) {
          ids = this.rowids.all(`"${g.replace(/"/g, '""')}"`) as number[];
          docs.set(g, ids);
        }
        for (const id of ids) hits.set(id, (hits.get(id) ?? 0) + 1);
      }
      const top = [...hits].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, PER_PHRASE);
      for (const [id] of top) propose(id, p);
    }
    // two-letter words ("UK") are too short to be phrases
    if (codes) for (const w of question.match(/(?<![\p{L}\p{N}])\p{L}{2}(?![\p{L}\p{N}])/gu) ?? []) direct.push(...this.codes(w));
    const best = new Map<string, ValueMatch>();
    for (const m of direct) {
      const key = JSON.stringify([m.table, m.column, m.value]);
      const prev = best.get(key);
      if (!prev || prev.score < m.score) best.set(key, m);
    }
    for (const [id, found] of candidates) {
      const row = this.fetch.get(id) as { value: string; folded: string; tbl: string; col: string } | undefined;
      if (!row) continue;
      let score = 0;
      for (const q of all) {
        if (!found.some((p) => q.start < p.end && p.start < q.end)) continue;
        score = Math.max(score, similarity(q.text, row.folded, threshold));
      }
      if (score < threshold) continue;
      const key = JSON.stringify([row.tbl, row.col, row.value]);
      const prev = best.get(key);
      if (!prev || prev.score < score) best.set(key, { table: row.tbl, column: row.col, value: row.value, score });
    }
    return [...best.values()]
      .sort(
        (a, b) =>
          b.score - a.score ||
          b.value.length - a.value.length ||
          a.table.localeCompare(b.table) ||
          a.column.localeCompare(b.column) ||
          a.value.localeCompare(b.value),
      )
      .slice(0, limit);
  }

  /** Closes the index file. */
  close(): void {
    this.db.close();
  }
}

/** The singulars a folded plural may stand for ("eps" → "ep", "boxes" → "boxe", "box"); [] for a word not ending in "s". */
function singulars(folded: string): string[] {
  if (!/\p{L}{2}s$/u.test(folded)) return [];
  return folded.endsWith("es") ? [folded.slice(0, -1), folded.slice(0, -2)] : [folded.slice(0, -1)];
}

/** Code readers by index file (whose name hashes the database's version): the grammar builder opens an index per question. */
const readers = new Map<string, CodeReader>();

function cachedReader(file: string, build: () => CodeReader): CodeReader {
  let reader = readers.get(file);
  if (reader) {
    readers.delete(file);
  } else {
    reader = build();
    while (readers.size >= 64) readers.delete(readers.keys().next().value!);
  }
  readers.set(file, reader);
  return reader;
}

function isValidIndex(file: string): boolean {
  try {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      return db.prepare("SELECT value FROM meta WHERE key = 'version'").pluck().get() === FORMAT_VERSION;
    } finally {
      db.close();
    }
  } catch {
    return false;
  }
}

/** Builds the index file of `dbPath` unless a valid one exists; returns its path (what ./offload.ts runs in a child). */
export function buildValueIndexFile(dbPath: string, options: ValueIndexOptions = {}): string {
  const s = settings(options);
  const file = valueIndexFile(dbPath, s);
  if (!existsSync(file) || !isValidIndex(file)) buildIndex(dbPath, file, s);
  return file;
}

function buildIndex(dbPath: string, file: string, s: Required<ValueIndexOptions>): void {
  const schema = loadSchema(dbPath, { examples: 0 });
  mkdirSync(s.indexDir, { recursive: true });
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  const src = openReadOnly(dbPath);
  const out = new Database(tmp);
  try {
    out.pragma("journal_mode = OFF");
    out.pragma("synchronous = OFF");
    out.exec(`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE cols (id INTEGER PRIMARY KEY, tbl TEXT NOT NULL, col TEXT NOT NULL);
      CREATE TABLE value_rows (id INTEGER PRIMARY KEY, value TEXT NOT NULL, folded TEXT NOT NULL, col_id INTEGER NOT NULL);
      CREATE VIRTUAL TABLE vals USING fts5(folded, content = 'value_rows', content_rowid = 'id', tokenize = 'trigram');`);
    const addCol = out.prepare("INSERT INTO cols (tbl, col) VALUES (?, ?)");
    const addVal = out.prepare("INSERT INTO value_rows (value, folded, col_id) VALUES (?, ?, ?)");
    let count = 0;
    out.transaction(() => {
      for (const table of schema.tables) {
        for (const column of table.columns) {
          if (count >= s.maxValuesTotal) break;
          if (affinityIsNumeric(column.type)) continue;
          const c = quoteIdent(column.name);
          let values: string[];
          try {
            values = (
              src
                .prepare(
                  `SELECT DISTINCT ${c} FROM ${quoteIdent(table.name)}
                   WHERE typeof(${c}) = 'text' AND length(${c}) BETWEEN 1 AND ${s.maxValueLength}
                   LIMIT ${Math.min(s.maxValuesPerColumn, s.maxValuesTotal - count)}`,
                )
                .pluck()
                .all() as string[]
            ).filter((v) => isIndexable(v, s.maxValueLength));
          } catch {
            continue;
          }
          if (values.length === 0) continue;
          const colId = addCol.run(table.name, column.name).lastInsertRowid;
          for (const v of values) addVal.run(v, fold(v), colId);
          count += values.length;
        }
      }
      out.exec(`INSERT INTO vals (vals) VALUES ('rebuild');
        CREATE INDEX value_rows_folded ON value_rows (folded);
        CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, vals, row);
        CREATE TABLE grams (term TEXT PRIMARY KEY, doc INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO grams SELECT term, doc FROM temp.vocab;
        DROP TABLE temp.vocab;`);
      const meta = out.prepare("INSERT INTO meta (key, value) VALUES (?, ?)");
      meta.run("version", FORMAT_VERSION);
      meta.run("source", schema.path);
      meta.run("values", String(count));
      meta.run("names", JSON.stringify(schema.tables.map((t) => ({ name: t.name, columns: t.columns.map((c) => c.name) }))));
    })();
  } catch (err) {
    out.close();
    src.close();
    rmSync(tmp, { force: true });
    throw err;
  }
  out.close();
  src.close();
  renameSync(tmp, file);
  removeEarlierVersions(file, dbPath, s);
}

/** The prompt's "Matched Values" lines, one `table.column : 'value'` per match (quotes doubled); "" when none. */
export function formatMatchedValues(matches: ReadonlyArray<ValueMatch>): string {
  return matches.map((m) => `${promptName(m.table)}.${promptName(m.column)} : '${m.value.replace(/'/g, "''")}'`).join("\n");
}
