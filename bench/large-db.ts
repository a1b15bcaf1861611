/**
 * A large database like the one that stalled the server: `tables` tables of random text, 4 columns
 * and `rows` rows each (1,500 × 300 ≈ 37 MB). Used by test/server/large-database.test.ts and
 * bench/large-database.ts.
 */
import Database from "better-sqlite3";

const WORDS =
  "amber basil cedar delta ember fjord garnet harbor indigo jasper kelp lumen marble nectar onyx pepper quartz russet sable tundra umber velvet willow xenon yarrow zephyr".split(
    " ",
  );

/** Writes the database to `path` (deterministic for a seed); returns its path. */
export function writeLargeDatabase(path: string, options: { tables?: number; rows?: number; seed?: number } = {}): string {
  const tables = options.tables ?? 1500;
  const rows = options.rows ?? 300;
  let state = (options.seed ?? 1) >>> 0;
  const rand = (): number => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  const text = (): string => {
    const n = 1 + Math.floor(rand() * 4);
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(WORDS[Math.floor(rand() * WORDS.length)]! + Math.floor(rand() * 1000).toString(36));
    return out.join(" ");
  };
  const db = new Database(path);
  db.pragma("journal_mode = OFF");
  db.pragma("synchronous = OFF");
  db.transaction(() => {
    for (let t = 0; t < tables; t++) {
      db.exec(`CREATE TABLE t${t}_${WORDS[t % WORDS.length]} (id INTEGER PRIMARY KEY, label TEXT, note TEXT, city TEXT, code TEXT)`);
      const insert = db.prepare(`INSERT INTO t${t}_${WORDS[t % WORDS.length]} (label, note, city, code) VALUES (?, ?, ?, ?)`);
      for (let r = 0; r < rows; r++) insert.run(text(), text(), text(), text());
    }
  })();
  db.close();
  return path;
}
