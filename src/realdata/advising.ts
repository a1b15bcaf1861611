/**
 * Advising made executable: its 18-table schema as a SQLite database populated with rows (keys
 * consistent: every foreign key names an existing row), drawn around the values its questions ask
 * about (courses for the department and number pairs they name, instructors, topics, areas,
 * semesters), and its canonical SQL rewritten to SQLite with the placeholders filled. Seeded.
 */
import Database from "better-sqlite3";
import { Rng, type Difficulty } from "../examples/index.js";
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
  const rng = new Rng(seed);
  const { kinds, courses: pairs } = valuePools(entries);
  const pool = (k: string, fallback: string[]): string[] => (kinds.get(k)?.length ? kinds.get(k)! : fallback);
  const depts = pool("department", ["EECS"]);
  const topics = pool("topic", ["Algorithms"]);
  const areas = [...pool("area", ["software"])];
  const requirements = [...new Set([...pool("requirement", ["ULCS"]), "ULCS", "PreMajor", "MDE", "Other", "Core"])];
  const rows = new Map<string, Row[]>();
  for (const t of schema.keys()) rows.set(t, []);
  const push = (t: string, r: Row): void => {
    rows.get(t)!.push(r);
  };
  const yn = (p = 0.5): string => (rng.chance(p) ? "Y" : "N");

  // semesters: the codes and the words the questions use, over the years they name
  const years = [...new Set([...pool("year", []).map(Number).filter(Number.isFinite), ...Array.from({ length: 12 }, (_, i) => 2008 + i)])].sort((a, b) => a - b);
  const semWords = [...new Set([...SEMESTERS, ...pool("semester", [])])];
  let semId = 0;
  for (const year of years) for (const s of semWords) push("semester", { semester_id: ++semId, semester: s, year });
  const semesters = rows.get("semester")!;
  const recent = semesters.filter((s) => Number(s.year) >= 2016 && Number(s.year) <= 2017);

  // courses: one per department-number pair the questions name, plus a few per department
  const seen = new Set(pairs.map(([d, n]) => `${d} ${n}`));
  const all: [string, string][] = [...pairs];
  for (const d of depts) {
    for (let k = 0; k < 2; k++) {
      const n = String(rng.int(100, 999));
      if (!seen.has(`${d} ${n}`)) {
        seen.add(`${d} ${n}`);
        all.push([d, n]);
      }
    }
  }
  const credits = pool("credit", ["3", "4"]);
  all.forEach(([dept, number], i) => {
    const topic = rng.pick(topics);
    const name = rng.pick([topic, `Introduction to ${topic}`, `Advanced ${topic}`, `${topic} ${rng.pick(pool("misc", ["Seminar"]))}`]);
    push("course", {
      course_id: i + 1,
      name,
      department: dept,
      number,
      credits: rng.pick(credits),
      advisory_requirement: rng.chance(0.3) ? `${rng.pick(depts)} ${rng.int(100, 599)}` : null,
      enforced_requirement: rng.chance(0.3) ? `${dept} ${rng.int(100, 499)}` : null,
      description: `This course covers ${topic.toLowerCase()} and ${rng.pick(topics).toLowerCase()}.`,
      num_semesters: rng.int(1, 12),
      num_enrolled: rng.int(5, 400),
      has_discussion: yn(),
      has_lab: yn(0.3),
      has_projects: yn(),
      has_exams: yn(0.7),
      num_reviews: rng.int(0, 80),
      clarity_score: rng.int(0, 5),
      easiness_score: rng.int(0, 5),
      helpfulness_score: rng.int(0, 5),
    });
  });
  const courses = rows.get("course")!;
  const courseIds = courses.map((c) => Number(c.course_id));

  for (const c of courses) {
    for (const a of rng.sample(areas, rng.int(1, 2))) push("area", { course_id: c.course_id, area: a });
    const tags: Row = { course_id: c.course_id };
    for (const col of schema.get("course_tags_count") ?? []) if (col.name !== "course_id") tags[col.name] = rng.int(0, 20);
    push("course_tags_count", tags);
    if (rng.chance(0.6)) {
      const pre = rng.pick(courseIds);
      if (pre !== c.course_id) push("course_prerequisite", { pre_course_id: pre, course_id: c.course_id });
    }
  }

  // programs
  const programNames = [...new Set([...pool("program", []), "CS-LSA", "CS-ENG", "DATA-SCI", "EE"])];
  programNames.forEach((name, i) => push("program", { program_id: i + 1, name, college: rng.pick(["LSA", "Engineering"]), introduction: `The ${name} program.` }));
  const programIds = programNames.map((_, i) => i + 1);
  for (const p of programIds) for (const cat of requirements) push("program_requirement", { program_id: p, category: cat, min_credit: rng.int(3, 30), additional_req: rng.chance(0.3) ? "C or better" : null });
  for (const c of courses) {
    const cats = rng.sample(requirements, rng.int(1, 2));
    for (const cat of cats) push("program_course", { program_id: rng.chance(0.7) ? 1 : rng.pick(programIds), course_id: c.course_id, workload: rng.int(1, 5), category: cat });
  }

  // instructors: the names the questions ask about, and others
  const instrNames = [...new Set([...pool("instructor", []), ...Array.from({ length: 60 }, () => `${rng.pick(FIRST_NAMES)} ${rng.pick(LAST_NAMES)}`)])];
  instrNames.forEach((name, i) => push("instructor", { instructor_id: i + 1, name, uniqname: name.toLowerCase().replace(/[^a-z]/g, "").slice(0, 8) }));
  const instrIds = instrNames.map((_, i) => i + 1);

  // offerings: one to three per course, most of them in 2016–2017
  const times = [...new Set([...pool("time", []), ...TIMES])];
  let offId = 0;
  for (const c of courses) {
    const n = rng.int(1, 3);
    for (let k = 0; k < n; k++) {
      const sem = rng.chance(0.6) && recent.length ? rng.pick(recent) : rng.pick(semesters);
      const start = rng.pick(times);
      const [h, m] = start.split(":").map(Number) as [number, number];
      const days = Object.fromEntries(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"].map((d, j) => [d, j < 5 ? yn(0.4) : yn(0.05)]));
      push("course_offering", {
        offering_id: ++offId,
        course_id: c.course_id,
        semester: sem.semester_id,
        section_number: rng.int(1, 3),
        start_time: start,
        end_time: `${(h + rng.int(1, 2)) % 24}:${String(m).padStart(2, "0")}`,
        ...days,
        has_final_project: yn(0.4),
        has_final_exam: yn(0.6),
        textbook: rng.chance(0.5) ? `${rng.pick(topics)} (${rng.int(1, 5)}th edition)` : null,
        class_address: `${rng.int(1000, 2999)} ${rng.pick(["EECS", "BBB", "DOW", "GGBL", "MH"])}`,
        allow_audit: yn(0.3),
      });
      for (const ins of rng.sample(instrIds, rng.int(1, 2))) push("offering_instructor", { offering_instructor_id: rows.get("offering_instructor")!.length + 1, offering_id: offId, instructor_id: ins });
    }
  }
  const offerings = rows.get("course_offering")!;

  // students: student 1 is the one asking ("I", "my"); the others fill the tables
  const firsts = [...pool("firstname", []), ...FIRST_NAMES];
  const lasts = [...pool("lastname", []), ...LAST_NAMES];
  for (let i = 1; i <= 200; i++) {
    push("student", {
      student_id: i,
      lastname: i <= lasts.length && i > 1 ? lasts[(i - 2) % lasts.length]! : rng.pick(lasts),
      firstname: i <= firsts.length && i > 1 ? firsts[(i - 2) % firsts.length]! : rng.pick(firsts),
      program_id: rng.chance(0.7) ? 1 : rng.pick(programIds),
      declare_major: rng.pick(depts),
      total_credit: rng.int(0, 140),
      total_gpa: Math.round((2 + rng.next() * 2) * 100) / 100,
      entered_as: rng.pick(["FirstYear", "Transfer"]),
      admit_term: rng.pick(years),
      predicted_graduation_semester: rng.pick(semesters).semester_id,
      degree: rng.pick(["BS", "BSE", "MS", "PhD"]),
      minor: rng.chance(0.3) ? rng.pick(depts) : null,
      internship: rng.chance(0.3) ? rng.pick(["summer", "co-op"]) : null,
    });
  }
  const grades = [...new Set([...pool("grade", []), ...GRADES])];
  for (let s = 1; s <= 200; s++) {
    const n = s === 1 ? 30 : rng.int(2, 6);
    for (const cid of rng.sample(courseIds, n)) {
      push("student_record", {
        student_id: s,
        course_id: cid,
        semester: rng.pick(semesters).semester_id,
        grade: rng.pick(grades),
        how: rng.pick(["in-person", "online", "transfer"]),
        transfer_source: null,
        earn_credit: yn(0.9),
        repeat_term: null,
        test_id: null,
      });
    }
  }
  for (let k = 0; k < 300; k++) push("comment_instructor", { instructor_id: rng.pick(instrIds), student_id: rng.int(1, 200), score: rng.int(1, 5), comment_text: rng.pick(["Great lectures.", "Tough grader.", "Very clear.", "Too fast."]) });
  for (let k = 0; k < 150; k++) push("gsi", { course_offering_id: rng.pick(offerings).offering_id, student_id: rng.int(1, 200) });
  for (let k = 0; k < 60; k++) push("ta", { campus_job_id: k + 1, student_id: rng.int(1, 200), location: rng.pick(["EECS", "BBB", "DOW"]) });
  for (let k = 0; k < 40; k++) {
    push("jobs", { job_id: k + 1, job_title: `${rng.pick(["Software", "Research", "Data", "Hardware"])} ${rng.pick(["Engineer", "Assistant", "Intern"])}`, description: "", requirement: rng.pick(requirements), city: "Ann Arbor", state: "MI", country: "USA", zip: 48109 });
  }
  requirements.forEach((r, i) => push("requirement", { requirement_id: i + 1, requirement: r, college: rng.pick(["LSA", "Engineering"]) }));
  return rows;
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
  const mysql = sql.trim().replace(/\s*;\s*$/, "").replace(/COUNT\( DISTINCT ([\w.]+(?: , [\w.]+)+) \)/g, (_, cols: string) => `COUNT( DISTINCT ${cols.split(" , ").join(" || ' ' || ")} )`); // MySQL's COUNT(DISTINCT a, b, …)
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
export function buildAdvising(dataDir: string, seed: number, write: (dbId: string, bytes: Buffer) => string): { items: AdvisingItem[]; stats: { questions: number; kept: number; dropped: Record<string, number>; databases: number; splits: Record<string, number>; seconds: number } } {
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
          lookups.push({ kind: "value", table, column: m[2]!, attr: "label", encoding: "plain", text: at >= 0 ? question.slice(at, at + value.length) : value, literal: quoteText(value) });
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
