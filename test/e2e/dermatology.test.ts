/**
 * The README's showcase question on the shipped starter model, through the real runtime, the real
 * server on a real port and a real browser: "How many doctors specialise in dermatology?" on
 * clinic. Under tree-prune with 4 candidates (the playground's default), constrained to the schema's
 * names and the database's spellings as the starter is by default, v3.2 answers 11 at 13 of seeds 1-16
 * (15 under the names' grammar alone, also 15 unconstrained, some candidates there writing a recalled
 * `specialty_name`; the three it misses now settle on another stored value, `'Pediatrics'`, `'F'`,
 * `'60'`); at 1, three right candidates beside one that counts the other doctors: the one that
 * disagrees must lose the vote.
 * (With an earlier starter, misspelt specialties counted 0 and outvoted the one candidate that
 * counted 11; test/decoding covers the vote's rules.)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { startServer, type RunningServer } from "../../src/server/index.js";

const STARTER = fileURLToPath(new URL("../../models/reex-starter.gguf", import.meta.url));
const QUESTION = "How many doctors specialise in dermatology?";
/** A seed under which tree-prune-4 samples right candidates and one that disagrees (v3.2: 3 votes each against 1). */
const SEED = 1;

let runtime: Runtime;
let server: RunningServer;
let browser: Browser;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "reex-derm-"));
  const config = parseConfig({ server: { port: 0, logLevel: "silent" }, sql: { dataDir }, policy: { threads: 1 } });
  runtime = await createRuntime(config);
  expect(runtime.model).toEqual({ path: STARTER, origin: "starter" });
  server = await startServer(config, runtime);
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("the clinic dermatology question on the starter model", () => {
  it("answers 11 with tree-prune-4 over REST, outvoting the candidate that disagrees", async () => {
    const res = await fetch(`${server.url}/v1/sql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ database: "clinic", question: QUESTION, strategy: "tree-prune", candidates: 4, seed: SEED }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { sql: string; answerable: boolean; result: { rows: unknown[][] }; candidates: { sql: string | null; votes: number }[] };
    expect(body.result.rows).toEqual([[11]]);
    expect(body.sql).toContain("'Dermatology'");
    expect(body.answerable).toBe(true);
    const winners = body.candidates.filter((c) => c.sql === body.sql);
    const others = body.candidates.filter((c) => c.sql !== body.sql);
    expect(winners.length).toBeGreaterThan(1);
    expect(others.length).toBeGreaterThan(0); // others were sampled, and lost
    expect(Math.max(...others.map((c) => c.votes))).toBeLessThan(winners[0]!.votes);
  }, 120_000);

  it("answers 11 in the playground with its default strategy and candidates", async () => {
    const page = await browser.newPage({ viewport: { width: 1360, height: 1000 } });
    try {
      await page.goto(server.url + "/");
      const clinic = (await runtime.registry.list()).find((d) => d.name === "clinic")!;
      await page.waitForSelector(`#database option[value="${clinic.id}"]`, { state: "attached" });
      await page.selectOption("#database", clinic.id);
      // the question box suggests a question about the selected database
      expect(await page.getAttribute("#question", "placeholder")).toBe(QUESTION);
      expect(await page.inputValue("#strategy")).toBe("tree-prune");
      expect(await page.inputValue("#candidates")).toBe("4");
      await page.fill("#question", QUESTION);
      await page.fill("#seed", String(SEED));
      await page.click("#ask");
      await page.waitForSelector("#final-result table", { timeout: 110_000 });
      expect(await page.textContent("#final-sql")).toContain("'Dermatology'");
      expect((await page.textContent("#final-result table"))!.replace(/\s+/g, " ")).toContain("11");
    } finally {
      await page.close();
    }
  }, 120_000);
});
