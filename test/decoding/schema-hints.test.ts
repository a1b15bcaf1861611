import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDecoder } from "../../src/decoding/index.js";
import { type Decoder } from "../../src/decoding/testing.js";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { FIXED_PROMPT, byState, eventLog, final, probe } from "./helpers.js";

let dir: string;
let dbPath: string;
let pool: ExecutorPool;
let decode: Decoder;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-hints-"));
  dbPath = join(dir, "zoo.sqlite");
  const db = new Database(dbPath);
  db.exec("CREATE TABLE specimens (specimen_id INTEGER PRIMARY KEY, name TEXT, animal_class TEXT); INSERT INTO specimens VALUES (1, 'Rex', 'REPTILE');");
  db.close();
  pool = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
  // misnames the column first, then writes the column named in the error's hint (or gives up without one)
  const script = byState((text) => {
    if (!text.includes("<result>")) return probe("SELECT DISTINCT class FROM specimens");
    const hinted = /specimens columns: .*\banimal_class\b/.test(text);
    return final(hinted ? "SELECT COUNT(*) FROM specimens WHERE animal_class = 'REPTILE'" : "SELECT COUNT(*) FROM specimens WHERE class = 'REPTILE'");
  });
  decode = createDecoder({ policy: new ScriptedPolicy(script), executor: pool, promptFor: () => FIXED_PROMPT });
});

afterAll(async () => {
  await pool.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("schema hints in decoding", () => {
  it("feed a misnamed probe the real columns, so the answer can use them", async () => {
    const log = eventLog();
    const answer = await decode({ dbPath, question: "How many reptiles?" }, { sink: log.sink });
    expect(log.of("result")[0]!.feedback).toBe("Error (missing_column): no such column: class\nspecimens columns: specimen_id, name, animal_class");
    expect(answer.sql).toBe("SELECT COUNT(*) FROM specimens WHERE animal_class = 'REPTILE'");
  });

  it("are left out when the request sets schemaHints false", async () => {
    const log = eventLog();
    const answer = await decode({ dbPath, question: "How many reptiles?", schemaHints: false }, { sink: log.sink });
    expect(log.of("result")[0]!.feedback).toBe("Error (missing_column): no such column: class");
    expect(answer.candidates[0]!.error).toMatch(/no such column: class/);
  });
});
