/**
 * Advising made executable: its 18-table schema as a SQLite database populated with rows (keys
 * consistent: every foreign key names an existing row), drawn around the values its questions ask
 * about (courses for the department and number pairs they name, instructors, topics, areas,
 * semesters), and its canonical SQL rewritten to SQLite with the placeholders filled. Seeded.
 */
import Database from "better-sqlite3";
import { Rng, type Difficulty } from "../../src/examples/index.js";
import { FIRST_NAMES, LAST_NAMES, type Lookup } from "../synth/index.js";
import { fillText, quoteText } from "./wikisql.js";
import { readAdvisingEntries, readSchemaCsv, type RealEntry, type RealItem } from "./source.js";

/** The Advising database's id. */
export const ADVISING_DB_ID = "advising";

/** A column of the Advising schema. */
export interface AdvisingColumn {
  name: string;
  type: "INTEGER" | "REAL" | "TEXT";
  /** MySQL's declared type (`varchar(1)`, `time`). */
  declared: string;
  pk: boolean;
}

/** The schema: table name (lower case) → its columns (lower case), in file order. */
export type AdvisingSchema = Map<string, AdvisingColumn[]>;

/** Reads `advising-schema.csv`; names are lower-cased. */
export function readAdvisingSchema(dataDir: string): AdvisingSchema {
  const schema: AdvisingSchema = new Map();
  for (const cells of readSchemaCsv(dataDir, "advising-schema.csv")) {
    const [table, column, declared, , key] = cells;
    if (!table || table === "-" || !column || !declared) continue;
    const t = table.toLowerCase();
    const d = declared.toLowerCase();
    const type = d.startsWith("int") ? "INTEGER" : d.startsWith("float") ? "REAL" : "TEXT";
    const list = schema.get(t) ?? [];
    list.push({ name: column.toLowerCase(), type, declared: d, pk: key === "PRI" });
    schema.set(t, list);
  }
  return schema;
}

/** The keys the schema implies (by name and by the data's documentation): child table.column → parent table.column. */
export const ADVISING_FOREIGN_KEYS: readonly (readonly [string, string, string, string])[] = [
  ["area", "course_id", "course", "course_id"],
  ["comment_instructor", "instructor_id", "instructor", "instructor_id"],
  ["comment_instructor", "student_id", "student", "student_id"],
  ["course_offering", "course_id", "course", "course_id"],
  ["course_offering", "semester", "semester", "semester_id"],
  ["course_prerequisite", "pre_course_id", "course", "course_id"],
  ["course_prerequisite", "course_id", "course", "course_id"],
  ["course_tags_count", "course_id", "course", "course_id"],
  ["gsi", "course_offering_id", "course_offering", "offering_id"],
  ["gsi", "student_id", "student", "student_id"],
  ["offering_instructor", "offering_id", "course_offering", "offering_id"],
  ["offering_instructor", "instructor_id", "instructor", "instructor_id"],
  ["program_course", "program_id", "program", "program_id"],
  ["program_course", "course_id", "course", "course_id"],
  ["program_requirement", "program_id", "program", "program_id"],
  ["student", "program_id", "program", "program_id"],
  ["student_record", "student_id", "student", "student_id"],
  ["student_record", "course_id", "course", "course_id"],
  ["student_record", "semester", "semester", "semester_id"],
  ["ta", "student_id", "student", "student_id"],
];

type Row = Record<string, string | number | null | undefined>;

/** Values the questions ask about, by placeholder kind (`department`, `topic`…), from every split: they are the database's contents, not questions. */
function valuePools(entries: readonly RealEntry[]): { kinds: Map<string, string[]>; courses: [string, string][] } {
  const kinds = new Map<string, Set<string>>();
  const courses = new Map<string, [string, string]>();
  for (const e of entries) {
    for (const s of e.sentences) {
      const vars = filledVariables(e, s.variables);
      for (const [k, v] of Object.entries(vars)) {
        const kind = k.replace(/\d+$/, "");
        if (!kinds.has(kind)) kinds.set(kind, new Set());
        if (v !== "") kinds.get(kind)!.add(v);
      }
      const dept = vars["department0"];
      for (const [k, v] of Object.entries(vars)) if (/^number\d+$/.test(k) && dept && v) courses.set(`${dept} ${v}`, [dept, v]);
    }
  }
  return { kinds: new Map([...kinds].map(([k, v]) => [k, [...v].sort()])), courses: [...courses.values()] };
}

/** A sentence's variables, an empty value replaced by the entry's example (Advising leaves some unstated). */
function filledVariables(e: RealEntry, vars: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = { ...vars };
  for (const v of e.variables ?? []) if ((out[v.name] ?? "") === "") out[v.name] = v.example;
  return out;
}

const SEMESTERS = ["FA", "WN", "SP", "SU", "SS"];
const GRADES = ["A+", "A", "A-", "B+", "B", "B-", "C+", "C", "C-", "D", "F"];
const TIMES = ["8:00", "9:00", "10:00", "11:00", "12:00", "13:00", "14:00", "15:00", "16:00", "1:00", "2:00", "3:00", "6:00"];

/** Populates every table; deterministic for `seed`. */
export function advisingRows(schema: AdvisingSchema, entries: readonly RealEntry[], seed: string): Map<string, Row[]> {
  return new AdvisingPopulation(schema, entries, seed).build();
}

/** The Advising tables being populated, with the values the questions name; each method fills a group of tables, in a fixed order of random draws. */
class AdvisingPopulation {
  private readonly rng: Rng;
  private readonly kinds: Map<string, string[]>;
  /** The department-number pairs the questions name. */
  private readonly pairs: [string, string][];
  private readonly rows = new Map<string, Row[]>();
  private readonly depts: string[];
  private readonly topics: string[];
  private readonly areas: string[];
  private readonly requirements: string[];
  private years: number[] = [];
  private semesters: Row[] = [];
  private recent: Row[] = [];
  private courses: Row[] = [];
  private courseIds: number[] = [];
  private programIds: number[] = [];
  private instrIds: number[] = [];
  private offerings: Row[] = [];

  constructor(
    private readonly schema: AdvisingSchema,
    entries: readonly RealEntry[],
    seed: string,
  ) {
    this.rng = new Rng(seed);
    const { kinds, courses } = valuePools(entries);
    this.kinds = kinds;
    this.pairs = courses;
    this.depts = this.pool("department", ["EECS"]);
    this.topics = this.pool("topic", ["Algorithms"]);
    this.areas = [...this.pool("area", ["software"])];
    this.requirements = [...new Set([...this.pool("requirement", ["ULCS"]), "ULCS", "PreMajor", "MDE", "Other", "Core"])];
    for (const t of schema.keys()) this.rows.set(t, []);
  }

  build(): Map<string, Row[]> {
    this.fillSemesters();
    this.fillCourses();
    this.fillCourseLinks();
    this.fillPrograms();
    this.fillInstructors();
    this.fillOfferings();
    this.fillStudents();
    this.fillTheRest();
    return this.rows;
  }

  /** The values the questions use for a placeholder kind, else `fallback`. */
  private pool(k: string, fallback: string[]): string[] {
    return this.kinds.get(k)?.length ? this.kinds.get(k)! : fallback;
  }

  private push(t: string, r: Row): void {
    this.rows.get(t)!.push(r);
  }

  private yn(p = 0.5): string {
    return this.rng.chance(p) ? "Y" : "N";
  }

  /** Semesters: the codes and the words the questions use, over the years they name. */
  private fillSemesters(): void {
    // semesters: the codes and the words the questions use, over the years they name
    this.years = [...new Set([...this.pool("year", []).map(Number).filter(Number.isFinite), ...Array.from({ length: 12 }, (_, i) => 2008 + i)])].sort(
      (a, b) => a - b,
    );
    const semWords = [...new Set([...SEMESTERS, ...this.pool("semester", [])])];
    let semId = 0;
    for (const year of this.years) for (const s of semWords) this.push("semester", { semester_id: ++semId, semester: s, year });
    this.semesters = this.rows.get("semester")!;
    this.recent = this.semesters.filter((s) => Number(s.year) >= 2016 && Number(s.year) <= 2017);
  }

  /** Courses: one per department-number pair the questions name, plus a few per department. */
  private fillCourses(): void {
    // courses: one per department-number pair the questions name, plus a few per department
    const seen = new Set(this.pairs.map(([d, n]) => `${d} ${n}`));
    const all: [string, string][] = [...this.pairs];
    for (const d of this.depts) {
      for (let k = 0; k < 2; k++) {
        const n = String(this.rng.int(100, 999));
        if (!seen.has(`${d} ${n}`)) {
          seen.add(`${d} ${n}`);
          all.push([d, n]);
        }
      }
    }
    const credits = this.pool("credit", ["3", "4"]);
    all.forEach(([dept, number], i) => {
      const topic = this.rng.pick(this.topics);
      const name = this.rng.pick([topic, `Introduction to ${topic}`, `Advanced ${topic}`, `${topic} ${this.rng.pick(this.pool("misc", ["Seminar"]))}`]);
      this.push("course", {
        course_id: i + 1,
        name,
        department: dept,
        number,
        credits: this.rng.pick(credits),
        advisory_requirement: this.rng.chance(0.3) ? `${this.rng.pick(this.depts)} ${this.rng.int(100, 599)}` : null,
        enforced_requirement: this.rng.chance(0.3) ? `${dept} ${this.rng.int(100, 499)}` : null,
        description: `This course covers ${topic.toLowerCase()} and ${this.rng.pick(this.topics).toLowerCase()}.`,
        num_semesters: this.rng.int(1, 12),
        num_enrolled: this.rng.int(5, 400),
        has_discussion: this.yn(),
        has_lab: this.yn(0.3),
        has_projects: this.yn(),
        has_exams: this.yn(0.7),
        num_reviews: this.rng.int(0, 80),
        clarity_score: this.rng.int(0, 5),
        easiness_score: this.rng.int(0, 5),
        helpfulness_score: this.rng.int(0, 5),
      });
    });
    this.courses = this.rows.get("course")!;
    this.courseIds = this.courses.map((c) => Number(c.course_id));
  }

  /** Each course's areas, tag counts and prerequisite. */
  private fillCourseLinks(): void {
    for (const c of this.courses) {
      for (const a of this.rng.sample(this.areas, this.rng.int(1, 2))) this.push("area", { course_id: c.course_id, area: a });
      const tags: Row = { course_id: c.course_id };
      for (const col of this.schema.get("course_tags_count") ?? []) if (col.name !== "course_id") tags[col.name] = this.rng.int(0, 20);
      this.push("course_tags_count", tags);
      if (this.rng.chance(0.6)) {
        const pre = this.rng.pick(this.courseIds);
        if (pre !== c.course_id) this.push("course_prerequisite", { pre_course_id: pre, course_id: c.course_id });
      }
    }
  }

  /** Programs, their requirements and their courses. */
  private fillPrograms(): void {
    // programs
    const programNames = [...new Set([...this.pool("program", []), "CS-LSA", "CS-ENG", "DATA-SCI", "EE"])];
    programNames.forEach((name, i) =>
      this.push("program", { program_id: i + 1, name, college: this.rng.pick(["LSA", "Engineering"]), introduction: `The ${name} program.` }),
    );
    this.programIds = programNames.map((_, i) => i + 1);
    for (const p of this.programIds)
      for (const cat of this.requirements)
        this.push("program_requirement", {
          program_id: p,
          category: cat,
          min_credit: this.rng.int(3, 30),
          additional_req: this.rng.chance(0.3) ? "C or better" : null,
        });
    for (const c of this.courses) {
      const cats = this.rng.sample(this.requirements, this.rng.int(1, 2));
      for (const cat of cats)
        this.push("program_course", {
          program_id: this.rng.chance(0.7) ? 1 : this.rng.pick(this.programIds),
          course_id: c.course_id,
          workload: this.rng.int(1, 5),
          category: cat,
        });
    }
  }

  /** Instructors: the names the questions ask about, and others. */
  private fillInstructors(): void {
    // instructors: the names the questions ask about, and others
    const instrNames = [
      ...new Set([...this.pool("instructor", []), ...Array.from({ length: 60 }, () => `${this.rng.pick(FIRST_NAMES)} ${this.rng.pick(LAST_NAMES)}`)]),
    ];
    instrNames.forEach((name, i) =>
      this.push("instructor", {
        instructor_id: i + 1,
        name,
        uniqname: name
          .toLowerCase()
          .replace(/[^a-z]/g, "")
          .slice(0, 8),
      }),
    );
    this.instrIds = instrNames.map((_, i) => i + 1);
  }

  /** Offerings: one to three per course, most of them in 2016–2017. */
  private fillOfferings(): void {
    // offerings: one to three per course, most of them in 2016–2017
    const times = [...new Set([...this.pool("time", []), ...TIMES])];
    let offId = 0;
    for (const c of this.courses) {
      const n = this.rng.int(1, 3);
      for (let k = 0; k < n; k++) {
        const sem = this.rng.chance(0.6) && this.recent.length ? this.rng.pick(this.recent) : this.rng.pick(this.semesters);
        const start = this.rng.pick(times);
        const [h, m] = start.split(":").map(Number) as [number, number];
        const days = Object.fromEntries(
          ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"].map((d, j) => [d, j < 5 ? this.yn(0.4) : this.yn(0.05)]),
        );
        this.push("course_offering", {
          offering_id: ++offId,
          course_id: c.course_id,
          semester: sem.semester_id,
          section_number: this.rng.int(1, 3),
          start_time: start,
          end_time: `${(h + this.rng.int(1, 2)) % 24}:${String(m).padStart(2, "0")}`,
          ...days,
          has_final_project: this.yn(0.4),
          has_final_exam: this.yn(0.6),
          textbook: this.rng.chance(0.5) ? `${this.rng.pick(this.topics)} (${this.rng.int(1, 5)}th edition)` : null,
          class_address: `${this.rng.int(1000, 2999)} ${this.rng.pick(["EECS", "BBB", "DOW", "GGBL", "MH"])}`,
          allow_audit: this.yn(0.3),
        });
        for (const ins of this.rng.sample(this.instrIds, this.rng.int(1, 2)))
          this.push("offering_instructor", {
            offering_instructor_id: this.rows.get("offering_instructor")!.length + 1,
            offering_id: offId,
            instructor_id: ins,
          });
      }
    }
    this.offerings = this.rows.get("course_offering")!;
  }

  /** Students (student 1 is the one asking: "I", "my") and their records. */
  private fillStudents(): void {
    // students: student 1 is the one asking ("I", "my"); the others fill the tables
    const firsts = [...this.pool("firstname", []), ...FIRST_NAMES];
    const lasts = [...this.pool("lastname", []), ...LAST_NAMES];
    for (let i = 1; i <= 200; i++) {
      this.push("student", {
        student_id: i,
        lastname: i <= lasts.length && i > 1 ? lasts[(i - 2) % lasts.length]! : this.rng.pick(lasts),
        firstname: i <= firsts.length && i > 1 ? firsts[(i - 2) % firsts.length]! : this.rng.pick(firsts),
        program_id: this.rng.chance(0.7) ? 1 : this.rng.pick(this.programIds),
        declare_major: this.rng.pick(this.depts),
        total_credit: this.rng.int(0, 140),
        total_gpa: Math.round((2 + this.rng.next() * 2) * 100) / 100,
        entered_as: this.rng.pick(["FirstYear", "Transfer"]),
        admit_term: this.rng.pick(this.years),
        predicted_graduation_semester: this.rng.pick(this.semesters).semester_id,
        degree: this.rng.pick(["BS", "BSE", "MS", "PhD"]),
        minor: this.rng.chance(0.3) ? this.rng.pick(this.depts) : null,
        internship: this.rng.chance(0.3) ? this.rng.pick(["summer", "co-op"]) : null,
      });
    }
    const grades = [...new Set([...this.pool("grade", []), ...GRADES])];
    for (let s = 1; s <= 200; s++) {
      const n = s === 1 ? 30 : this.rng.int(2, 6);
      for (const cid of this.rng.sample(this.courseIds, n)) {
        this.push("student_record", {
          student_id: s,
          course_id: cid,
          semester: this.rng.pick(this.semesters).semester_id,
          grade: this.rng.pick(grades),
          how: this.rng.pick(["in-person", "online", "transfer"]),
          transfer_source: null,
          earn_credit: this.yn(0.9),
          repeat_term: null,
          test_id: null,
        });
      }
    }
  }

  /** Comments, GSIs, TAs, jobs and requirements. */
  private fillTheRest(): void {
    for (let k = 0; k < 300; k++)
      this.push("comment_instructor", {
        instructor_id: this.rng.pick(this.instrIds),
        student_id: this.rng.int(1, 200),
        score: this.rng.int(1, 5),
        comment_text: this.rng.pick(["Great lectures.", "Tough grader.", "Very clear.", "Too fast."]),
      });
    for (let k = 0; k < 150; k++) this.push("gsi", { course_offering_id: this.rng.pick(this.offerings).offering_id, student_id: this.rng.int(1, 200) });
    for (let k = 0; k < 60; k++) this.push("ta", { campus_job_id: k + 1, student_id: this.rng.int(1, 200), location: this.rng.pick(["EECS", "BBB", "DOW"]) });
    for (let k = 0; k < 40; k++) {
      this.push("jobs", {
        job_id: k + 1,
        job_title: `${this.rng.pick(["Software", "Research", "Data", "Hardware"])} ${this.rng.pick(["Engineer", "Assistant", "Intern"])}`,
        description: "",
        requirement: this.rng.pick(this.requirements),
        city: "Ann Arbor",
        state: "MI",
        country: "USA",
        zip: 48109,
      });
    }
    this.requirements.forEach((r, i) => this.push("requirement", { requirement_id: i + 1, requirement: r, college: this.rng.pick(["LSA", "Engineering"]) }));
  }
}

/** The populated Advising database, in memory; `serialize()` gives the file's bytes. */
export function advisingDatabase(schema: AdvisingSchema, rows: Map<string, Row[]>): Database.Database {
  const db = new Database(":memory:");
  db.pragma("page_size = 4096");
  for (const [table, cols] of schema) {
    const pk = cols.filter((c) => c.pk).map((c) => c.name);
    const fks = ADVISING_FOREIGN_KEYS.filter((f) => f[0] === table).map((f) => `FOREIGN KEY (${f[1]}) REFERENCES ${f[2]}(${f[3]})`);
    const defs = [...cols.map((c) => `${c.name} ${c.type}`), ...(pk.length ? [`PRIMARY KEY (${pk.join(", ")})`] : []), ...fks];
    db.exec(`CREATE TABLE ${table} (\n  ${defs.join(",\n  ")}\n)`);
  }
  db.pragma("foreign_keys = OFF");
  db.transaction(() => {
    for (const [table, cols] of schema) {
      const list = rows.get(table) ?? [];
      const insert = db.prepare(`INSERT OR IGNORE INTO ${table} (${cols.map((c) => c.name).join(", ")}) VALUES (${cols.map(() => "?").join(", ")})`);
      for (const r of list) insert.run(...cols.map((c) => r[c.name] ?? null));
    }
  })();
  for (const [child, column] of ADVISING_FOREIGN_KEYS) db.exec(`CREATE INDEX ${child}_${column}_idx ON ${child} (${column})`);
  db.exec("CREATE INDEX course_department_number_idx ON course (department, number)");
  db.exec("ANALYZE");
  const broken = db.pragma("foreign_key_check") as unknown[];
  if (broken.length > 0) throw new Error(`advising: ${broken.length} rows break a foreign key`);
  return db;
}

const NUMBER = /^-?\d+(\.\d+)?$/;

/**
 * Advising's canonical SQL rewritten to SQLite: placeholders filled (a number bare, text quoted,
 * inside `LIKE "%…%"` too), double-quoted strings single-quoted, table and column names and aliases
 * lower case (`COURSEalias0.NUMBER` → `coursealias0.number`), MySQL's `COUNT(DISTINCT a, b, …)` as
 * `COUNT(DISTINCT a || ' ' || b || …)`, the trailing `;` dropped.
 */
export function advisingSql(sql: string, vars: Record<string, string>, tables: ReadonlySet<string>): string {
  const names = Object.keys(vars).sort((a, b) => b.length - a.length);
  const fill = (s: string): string => (names.length ? s.replace(new RegExp(`\\b(${names.join("|")})\\b`, "g"), (n) => vars[n]!) : s);
  const mysql = sql
    .trim()
    .replace(/\s*;\s*$/, "")
    .replace(/COUNT\( DISTINCT ([\w.]+(?: , [\w.]+)+) \)/g, (_, cols: string) => `COUNT( DISTINCT ${cols.split(" , ").join(" || ' ' || ")} )`); // MySQL's COUNT(DISTINCT a, b, …)
  const parts = mysql.split(/("(?:[^"\\]|\\.)*")/);
  return parts
    .map((part, i) => {
      if (i % 2 === 1) return quoteText(fill(part.slice(1, -1)));
      let out = part.replace(/\b([A-Z][A-Z_]*)alias(\d+)\b/g, (_, t: string, n: string) => `${t.toLowerCase()}alias${n}`);
      out = out.replace(/\.([A-Z][A-Z_0-9]*)\b/g, (_, c: string) => `.${c.toLowerCase()}`);
      out = out.replace(/\b([A-Z][A-Z_]*)\b/g, (w: string) => (tables.has(w.toLowerCase()) ? w.toLowerCase() : w));
      if (names.length === 0) return out;
      return out.replace(new RegExp(`\\b(${names.join("|")})\\b`, "g"), (n) => {
        const v = vars[n]!;
        return NUMBER.test(v) ? v : quoteText(v);
      });
    })
    .join("")
    .replace(/\s+/g, " ")
    .replace(/ , /g, ", ")
    .replace(/\( /g, "(")
    .replace(/ \)/g, ")")
    .trim();
}

/** Light detokenising of Advising's tokenised text: `Can I take EECS 281 ?` → `Can I take EECS 281?`. */
export function detokenize(text: string): string {
  return text
    .replace(/\s+([?.,!:;])/g, "$1")
    .replace(/\s+('s|'re|'m|'ve|'ll|'d|n't)\b/gi, "$1")
    .replace(/\s+/g, " ")
    .trim();
}

/** An Advising question that runs and returns rows. */
export interface AdvisingItem extends RealItem {
  evidence: string;
  question_id: number;
  source: "advising";
}

function aliasTables(sql: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of sql.matchAll(/\b([a-z_]+) AS ([a-z_]+alias\d+)\b/g)) out.set(m[2]!, m[1]!);
  return out;
}

function difficultyOf(sql: string, tables: string[]): Difficulty {
  if (/\(\s*SELECT\b/i.test(sql) || tables.length >= 3) return "challenging";
  return tables.length === 2 || /\b(GROUP BY|COUNT|MIN|MAX|SUM|AVG)\b/.test(sql) ? "moderate" : "simple";
}

/** Builds the database and checks every question's SQL on it; `write` stores the file. */
export function buildAdvising(
  dataDir: string,
  seed: number,
  write: (dbId: string, bytes: Buffer) => string,
): {
  items: AdvisingItem[];
  stats: { questions: number; kept: number; dropped: Record<string, number>; databases: number; splits: Record<string, number>; seconds: number };
} {
  const entries = readAdvisingEntries(dataDir);
  const schema = readAdvisingSchema(dataDir);
  const tables = new Set(schema.keys());
  const rows = advisingRows(schema, entries, `reex-real:${seed}:advising`);
  const db = advisingDatabase(schema, rows);
  const items: AdvisingItem[] = [];
  const dropped: Record<string, number> = {};
  let questions = 0;
  try {
    for (const e of entries) {
      for (const s of e.sentences) {
        questions++;
        const vars = filledVariables(e, s.variables);
        const sql = advisingSql(e.sql[0] ?? "", vars, tables);
        let result: unknown[][];
        try {
          result = db.prepare(sql).raw(true).all() as unknown[][];
        } catch {
          dropped["sql-error"] = (dropped["sql-error"] ?? 0) + 1;
          continue;
        }
        if (result.length === 0 || result.every((r) => r.every((v) => v === null))) {
          dropped["no-rows"] = (dropped["no-rows"] ?? 0) + 1;
          continue;
        }
        const question = detokenize(fillText(s.text, vars));
        const aliases = aliasTables(sql);
        const used = [...new Set(aliases.values())];
        const lookups: Lookup[] = [];
        for (const m of sql.matchAll(/\b([a-z_]+alias\d+)\.([a-z_]+) = '((?:[^']|'')*)'/g)) {
          const table = aliases.get(m[1]!);
          const value = m[3]!.replace(/''/g, "'");
          if (!table || lookups.some((l) => l.table === table && l.column === m[2])) continue;
          const at = question.toLowerCase().indexOf(value.toLowerCase());
          lookups.push({
            kind: "value",
            table,
            column: m[2]!,
            attr: "label",
            encoding: "plain",
            text: at >= 0 ? question.slice(at, at + value.length) : value,
            literal: quoteText(value),
          });
        }
        const select = (sql.match(/^SELECT (.*?) FROM /)?.[1] ?? "").replace(/\b([a-z_]+alias\d+)\./g, (_, a: string) => `${aliases.get(a) ?? a}.`);
        items.push({
          db_id: ADVISING_DB_ID,
          split: s["question-split"],
          question,
          SQL: sql,
          difficulty: difficultyOf(sql, used),
          lookups,
          tables: used,
          goal: `find ${select.replace(/\s+/g, " ").slice(0, 160)}`,
          evidence: "",
          question_id: 0,
          source: "advising",
        });
      }
    }
    write(ADVISING_DB_ID, db.serialize());
  } finally {
    db.close();
  }
  return { items, stats: { questions, kept: items.length, dropped, databases: 1, splits: {}, seconds: 0 } };
}
