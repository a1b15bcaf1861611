/**
 * The README's showcase question on the shipped starter model, through the real runtime, the real
 * server on a real port and a real browser: "How many doctors specialise in dermatology?" on
 * clinic, under tree-prune with 4 candidates (the playground's default), constrained as the starter
 * is by default. A seed fixes the draws on one machine, not across CPUs: llama.cpp's kernels differ
 * between instruction sets, and a KV prefix reused from an earlier request was computed in other
 * batches, so a logit may move in its last bits and a draw near a boundary flip (CI once answered
 * 'Pediatrics' at a seed that answered 11 here). So the answer is checked over five seeds, each
 * vote is checked, and the page is checked for showing what the server answered.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { startServer, type RunningServer } from "../../src/server/index.js";

const STARTER = fileURLToPath(new URL("../../models/reex-starter.gguf", import.meta.url));
const QUESTION = "How many doctors specialise in dermatology?";
const SEEDS = [1, 2, 3, 4, 5];

let runtime: Runtime;
let server: RunningServer;
let browser: Browser;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "reex-derm-"));
  // the starter, named: parseConfig does not read the suite's REEX_POLICY_DEFAULT_MODEL, and Qwen may be pulled
  const config = parseConfig({ server: { port: 0, logLevel: "silent" }, sql: { dataDir }, policy: { threads: 1, defaultModel: "starter" } });
  runtime = await createRuntime(config);
  expect(runtime.model).toMatchObject({ path: STARTER, origin: "starter" });
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
  it("answers 11 with tree-prune-4 over REST at most seeds, the winner holding the most votes each time", async () => {
    const right: number[] = [];
    for (const seed of SEEDS) {
      const res = await fetch(`${server.url}/v1/sql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ database: "clinic", question: QUESTION, strategy: "tree-prune", candidates: 4, seed }),
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        sql: string;
        answerable: boolean;
        result: { rows: unknown[][] } | null;
        candidates: { sql: string | null; votes: number }[];
      };
      expect(body.candidates).toHaveLength(4);
      const winners = body.candidates.filter((c) => c.sql === body.sql);
      expect(winners.length).toBeGreaterThan(0);
      expect(Math.max(...body.candidates.map((c) => c.votes))).toBe(winners[0]!.votes);
      if (body.sql.includes("'Dermatology'") && JSON.stringify(body.result?.rows) === "[[11]]") right.push(seed);
    }
    // v3.2 with top-p 0.95: 15 of seeds 1-16 here
    expect(right.length, `right at seeds ${right.join(", ")}`).toBeGreaterThanOrEqual(3);
  }, 120_000);

  it("shows in the playground, with its default strategy and candidates, the answer the server streamed and the rows its SQL gives", async () => {
    const page = await browser.newPage({ viewport: { width: 1360, height: 1000 } });
    try {
      const sent: Record<string, unknown>[] = [];
      let done:
        | { answer: { sql: string; result: { rows: unknown[][] } | null; winner: number | null; candidates: { index: number; votes: number }[] } }
        | undefined;
      page.on("websocket", (ws) => {
        ws.on("framesent", (f) => sent.push(JSON.parse(String(f.payload))));
        ws.on("framereceived", (f) => {
          const ev = JSON.parse(String(f.payload));
          if (ev.type === "done") done = ev;
        });
      });
      await page.goto(server.url + "/");
      const clinic = (await runtime.registry.list()).find((d) => d.name === "clinic")!;
      await page.waitForSelector(`#database option[value="${clinic.id}"]`, { state: "attached" });
      await page.selectOption("#database", clinic.id);
      // the question box suggests a question about the selected database
      expect(await page.getAttribute("#question", "placeholder")).toBe(QUESTION);
      expect(await page.inputValue("#strategy")).toBe("tree-prune");
      expect(await page.inputValue("#candidates")).toBe("4");
      await page.fill("#question", QUESTION);
      await page.fill("#seed", String(SEEDS[0]));
      await page.click("#ask");
      await page.waitForSelector("#final-result table", { timeout: 110_000 });
      expect(sent[0]).toMatchObject({ database: clinic.id, question: QUESTION, strategy: "tree-prune", candidates: 4, seed: SEEDS[0] });
      expect(done).toBeDefined();
      const answer = done!.answer;
      expect(await page.textContent("#final-sql")).toBe(answer.sql);
      const winner = answer.candidates.find((c) => c.index === answer.winner)!;
      expect(await page.textContent("#final-meta")).toContain(`${winner.votes} vote`);
      // the table shows what the SQL gives on the database itself
      const db = new Database(clinic.path, { readonly: true });
      const rows = db.prepare(answer.sql).raw().all() as unknown[][];
      db.close();
      expect(rows).toEqual(answer.result!.rows);
      const cells = await page.$$eval("#final-result table tbody tr", (trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)));
      expect(cells).toEqual(rows.map((r) => r.map((v) => String(v))));
    } finally {
      await page.close();
    }
  }, 120_000);
});
