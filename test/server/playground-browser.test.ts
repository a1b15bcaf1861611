import { existsSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { chromium, type Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Answer, AnswerRequest, DecodeContext } from "../../src/decoding/types.js";
import type { ReexEvent } from "../../src/events/index.js";
import type { ExecSuccess } from "../../src/sql/types.js";
import { exampleQuestions } from "../../src/examples/index.js";
import { listen, makeApp, makeSqlite, sleep, sqliteBytes, type TestApp } from "./helpers.js";

const CHROMIUM = "/usr/bin/chromium";
const OUTPUT = fileURLToPath(new URL("../.output/", import.meta.url));

const ok = (columns: string[], rows: (string | number)[][]): ExecSuccess => ({
  ok: true,
  columns,
  rows,
  rowCount: rows.length,
  truncated: false,
  empty: rows.length === 0,
  elapsedMs: 0.6,
});

/** A tree-prune decode with realistic text: one root, three branches, one pruned, two agreeing candidates. */
async function treeDecode(_req: AnswerRequest, ctx: DecodeContext): Promise<Answer> {
  const emit = (e: ReexEvent): void => ctx.sink?.(e);
  const say = async (path: string, text: string): Promise<void> => {
    for (const piece of text.match(/.{1,12}/gs) ?? []) {
      emit({ type: "token", path, text: piece });
      await sleep(2, ctx.signal);
    }
  };
  emit({ type: "branch", path: "0", parent: null, depth: 0 });
  await say(
    "0",
    "<think>The question asks for singers older than 30; the age is in singer.age. Let me check the values first.</think>\n<probe>SELECT name, age FROM singer ORDER BY age DESC</probe>",
  );
  emit({ type: "probe", path: "0", step: 1, sql: "SELECT name, age FROM singer ORDER BY age DESC" });
  emit({
    type: "result",
    path: "0",
    step: 1,
    result: ok(
      ["name", "age"],
      [
        ["Joe Sharp", 52],
        ["Rose White", 41],
        ["Timbaland", 32],
        ["Justin Brown", 29],
      ],
    ),
    feedback: "",
  });
  for (const p of ["0.0", "0.1", "0.2"]) emit({ type: "branch", path: p, parent: "0", depth: 1 });
  await say("0.0", "<think>Three singers are above 30.</think>\n<answer>SELECT name FROM singer WHERE age > 30</answer>");
  await say("0.1", "<probe>SELECT nme FROM singer</probe>");
  emit({ type: "probe", path: "0.1", step: 2, sql: "SELECT nme FROM singer" });
  emit({
    type: "result",
    path: "0.1",
    step: 2,
    result: { ok: false, error: { code: "SQL_NO_SUCH_COLUMN", category: "missing_column", message: "no such column: nme" }, elapsedMs: 0.2 },
    feedback: "",
  });
  emit({ type: "prune", path: "0.1", reason: "probe_error" });
  await say("0.2", "<answer>SELECT name FROM singer WHERE age >= 31</answer>");
  const winner = "SELECT name FROM singer WHERE age > 30";
  emit({ type: "candidate", path: "0.0", index: 0, sql: winner, ok: true, answerable: true });
  emit({ type: "candidate", path: "0.2", index: 1, sql: "SELECT name FROM singer WHERE age >= 31", ok: true, answerable: true });
  emit({ type: "vote", winner: 0, groups: [{ group: 0, votes: 2, members: [0, 1] }], rule: "majority", decidedBy: "majority" });
  emit({ type: "final", sql: winner, answerable: true });
  const result = ok(["name"], [["Joe Sharp"], ["Timbaland"], ["Rose White"]]);
  return {
    sql: winner,
    answerable: true,
    result,
    candidates: [
      { index: 0, path: "0.0", sql: winner, answerable: true, result, group: 0, votes: 2, interactions: 1, meanLogprob: -0.1, text: "" },
      {
        index: 1,
        path: "0.2",
        sql: "SELECT name FROM singer WHERE age >= 31",
        answerable: true,
        result,
        group: 0,
        votes: 2,
        interactions: 1,
        meanLogprob: -0.3,
        text: "",
      },
    ],
    winner: 0,
    decidedBy: "majority",
    usage: { promptTokens: 412, evaluatedTokens: 530, generatedTokens: 118 },
    timings: { totalMs: 180 },
  };
}

let browser: Browser | undefined;
let t: TestApp | undefined;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package`);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});
afterAll(async () => {
  await browser?.close();
});
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("the playground page", () => {
  it("lists databases, asks over the WebSocket, and renders the tree and the winning SQL with its result", async () => {
    t = await makeApp({ deps: { decode: treeDecode } });
    await t.registry.registerBytes(sqliteBytes(t.dir), { name: "another" });
    const { url } = await listen(t.app);
    const page = await browser!.newPage({ viewport: { width: 1360, height: 1000 } });
    const outside: string[] = [];
    const problems: string[] = [];
    page.on("request", (r) => {
      if (!r.url().startsWith(url)) outside.push(r.url());
    });
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(m.text());
    });
    page.on("pageerror", (e) => problems.push(e.message));

    await page.goto(url + "/");
    await page.waitForSelector(`#database option[value="${t.dbId}"]`, { state: "attached" });
    await page.selectOption("#database", t.dbId);
    await expect.poll(() => page.textContent("#tables")).toContain("singer");
    await page.fill("#question", "Which singers are older than 30?");
    await page.fill("#evidence", "older than 30 refers to age > 30");
    await page.selectOption("#strategy", "tree-prune");
    await page.fill("#candidates", "3");
    await page.click("#ask");

    await page.waitForSelector("#final-result table", { timeout: 10_000 });
    expect(await page.textContent("#final-sql")).toBe("SELECT name FROM singer WHERE age > 30");
    expect(await page.locator(".node").count()).toBe(4);
    expect(await page.locator('.node[data-path="0"] > .children > .node').count()).toBe(3);
    expect(await page.locator(".node.pruned").getAttribute("data-path")).toBe("0.1");
    expect(await page.locator(".node.pruned").textContent()).toContain("pruned: probe error");
    expect(await page.locator(".node.winner").getAttribute("data-path")).toBe("0.0");
    expect(await page.locator('.node[data-path="0"] .probe table tbody tr').count()).toBe(4);
    expect(await page.locator('.node[data-path="0.1"] .probe .err').textContent()).toContain("SQL_NO_SUCH_COLUMN");
    expect(await page.locator("#final-result tbody tr").count()).toBe(3);
    expect(await page.textContent("#final-meta")).toContain("2 votes for the winner");
    expect(await page.isEnabled("#ask")).toBe(true);

    mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: OUTPUT + "playground.png", fullPage: true });
    expect(outside).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();
  });

  it("stores the answer as a verified example from its card, refuses a right SQL that does not run, and shows a conversation's thread", async () => {
    t = await makeApp({ deps: { decode: treeDecode } });
    const { url } = await listen(t.app);
    const page = await browser!.newPage({ viewport: { width: 1360, height: 1000 } });
    const problems: string[] = [];
    page.on("pageerror", (e) => problems.push(e.message));
    await page.goto(url + "/");
    await page.waitForSelector(`#database option[value="${t.dbId}"]`, { state: "attached" });
    await page.selectOption("#database", t.dbId);
    await page.check("#follow");
    await page.fill("#question", "Which singers are older than 30?");
    await page.click("#ask");
    await page.waitForSelector("#final-result table", { timeout: 10_000 });
    expect(await page.isVisible("#teach")).toBe(true);
    expect(await page.textContent("#thread")).toContain("Which singers are older than 30? → SELECT name FROM singer WHERE age > 30");

    await page.click("#is-wrong");
    await page.fill("#right-sql", "SELECT nme FROM singer");
    await page.click("#save-sql");
    await expect.poll(() => page.textContent("#teach-note")).toContain("EXAMPLE_SQL_FAILED");
    await page.click("#is-right");
    await expect.poll(() => page.textContent("#teach-note")).toContain("Stored as verified example");
    const listed = await t.app.inject({ method: "GET", url: `/v1/databases/${t.dbId}/examples` });
    expect(listed.json().examples).toEqual([expect.objectContaining({ question: "Which singers are older than 30?", origin: "confirmed" })]);

    await page.fill("#question", "And which of them are from France?");
    await page.click("#ask");
    await expect.poll(() => page.locator("#thread li").count()).toBe(2);
    expect(await page.textContent("#final-meta")).toContain("turn 2 of the conversation");
    expect(problems).toEqual([]);
    await page.close();
  });

  it("asks for the API key when the server needs one and keeps it in localStorage", async () => {
    t = await makeApp({ server: { apiKeys: ["browser-key-0123"] }, deps: { decode: treeDecode } });
    const { url } = await listen(t.app);
    const page = await browser!.newPage();
    await page.goto(url + "/");
    await expect.poll(() => page.textContent("#banner")).toContain("API key");
    await page.fill("#key", "browser-key-0123");
    await page.dispatchEvent("#key", "change");
    await page.waitForSelector(`#database option[value="${t.dbId}"]`, { state: "attached" });
    expect(await page.evaluate<string | null>('localStorage.getItem("reex.apiKey")')).toBe("browser-key-0123");
    await page.fill("#question", "How many singers?");
    await page.click("#ask");
    await page.waitForSelector("#final-result table", { timeout: 10_000 });
    await page.close();
  });

  it('with API keys on, says a key is needed in the database list and when asking, not "pick a database"', async () => {
    t = await makeApp({ server: { apiKeys: ["browser-key-0123"] }, deps: { decode: treeDecode } });
    const { url } = await listen(t.app);
    const page = await browser!.newPage();
    await page.goto(url + "/");
    await expect.poll(() => page.textContent("#database")).toContain("API key needed");
    await page.fill("#question", "How many singers?");
    await page.click("#ask");
    const banner = await page.textContent("#banner");
    expect(banner).toContain("needs an API key");
    expect(banner).not.toContain("Pick or upload");
    expect(await page.evaluate<string | undefined>("document.activeElement?.id")).toBe("key");
    await page.close();
  });

  it("suggests a question about the selected database's own tables", async () => {
    t = await makeApp({ deps: { decode: treeDecode } });
    const { url } = await listen(t.app);
    const page = await browser!.newPage();
    await page.goto(url + "/");
    await page.waitForSelector(`#database option[value="${t.dbId}"]`, { state: "attached" });
    await expect.poll(() => page.getAttribute("#question", "placeholder")).toMatch(/^e\.g\. How many rows are in (singer|concert)\?$/);
    expect(await page.textContent("#tables")).toContain("singer");
    await page.close();
  });

  it("fills in an example database's question and its hint on request, and offers nothing for other databases", async () => {
    t = await makeApp({ deps: { decode: treeDecode } });
    const retail = await t.registry.registerPath(makeSqlite(t.dir, "retail.sqlite"), { name: "retail" });
    const { url } = await listen(t.app);
    const page = await browser!.newPage();
    await page.goto(url + "/");
    await page.waitForSelector(`#database option[value="${retail.id}"]`, { state: "attached" });
    await page.selectOption("#database", t.dbId);
    expect(await page.isVisible("#example")).toBe(false);
    await page.selectOption("#database", retail.id);
    const example = exampleQuestions().find((q) => q.db_id === "retail")!;
    expect(await page.getAttribute("#question", "placeholder")).toBe(example.question);
    await page.click("#example");
    expect(await page.inputValue("#question")).toBe(example.question);
    expect(await page.inputValue("#evidence")).toBe(example.evidence);
    await page.close();
  });

  it("names the model and the server's profile in the header, never the model's path, and sends the chosen profile", async () => {
    const seen: (string | undefined)[] = [];
    t = await makeApp({
      deps: { decode: (req, ctx) => (seen.push(req.profile), treeDecode(req, ctx)), profile: { id: "omnisql", reason: "set by policy.profile" } },
    });
    t.policy.info = { ...t.policy.info, model: "/srv/private/models/omnisql-7b.gguf", metadata: { name: "OmniSQL 7B" } };
    const { url } = await listen(t.app);
    const page = await browser!.newPage();
    await page.goto(url + "/");
    await expect.poll(() => page.textContent("#ready-text")).toContain("OmniSQL 7B");
    const header = (await page.textContent("#ready-text"))!;
    expect(header).toContain("profile omnisql");
    expect(header).not.toContain("/srv/private");
    expect(await page.getAttribute("#ready-text", "title")).toContain("set by policy.profile");
    await page.waitForSelector(`#database option[value="${t.dbId}"]`, { state: "attached" });
    await page.selectOption("#database", t.dbId);
    await page.fill("#question", "How many singers?");
    await page.selectOption("#profile", "skyrl-sql");
    await page.click("#ask");
    await page.waitForSelector("#final-result table", { timeout: 10_000 });
    expect(seen).toEqual(["skyrl-sql"]);
    await page.close();
  });

  it("says why a winner with no votes was picked, with the error that stopped its SQL", async () => {
    const failing = "SELECT nme FROM singer";
    const fallback = async (_req: AnswerRequest, ctx: DecodeContext): Promise<Answer> => {
      ctx.sink?.({ type: "branch", path: "0", parent: null, depth: 0 });
      ctx.sink?.({ type: "candidate", path: "0", index: 0, sql: failing, ok: false, answerable: true, error: "SQL_NO_SUCH_COLUMN: no such column: nme" });
      ctx.sink?.({ type: "vote", winner: 0, groups: [], rule: "fallback", decidedBy: "fallback-logprob" });
      ctx.sink?.({ type: "final", sql: failing, answerable: true });
      return {
        sql: failing,
        answerable: true,
        candidates: [
          {
            index: 0,
            path: "0",
            sql: failing,
            answerable: true,
            group: null,
            votes: 0,
            error: "SQL_NO_SUCH_COLUMN: no such column: nme",
            interactions: 0,
            meanLogprob: -0.4,
            text: "",
          },
        ],
        winner: 0,
        decidedBy: "fallback-logprob",
        usage: { promptTokens: 10, evaluatedTokens: 10, generatedTokens: 5 },
        timings: { totalMs: 3 },
      };
    };
    t = await makeApp({ deps: { decode: fallback } });
    const { url } = await listen(t.app);
    const page = await browser!.newPage();
    await page.goto(url + "/");
    await page.waitForSelector(`#database option[value="${t.dbId}"]`, { state: "attached" });
    await page.selectOption("#database", t.dbId);
    await page.fill("#question", "Which singers?");
    await page.selectOption("#strategy", "greedy");
    await page.click("#ask");
    await expect.poll(() => page.textContent("#final-meta")).toContain("no candidate's SQL ran");
    const meta = (await page.textContent("#final-meta"))!;
    expect(meta).toContain("no such column: nme");
    expect(meta).not.toContain("0 votes");
    await page.close();
  });

  it("says when the server answers with the starter or the placeholder model, and not for a configured one", async () => {
    for (const [origin, expected] of [
      ["starter", "starter model"],
      ["placeholder", "random-weight placeholder"],
      ["configured", null],
    ] as const) {
      t = await makeApp({ deps: { decode: treeDecode, model: { origin } } });
      const { url } = await listen(t.app);
      const page = await browser!.newPage();
      await page.goto(url + "/");
      await expect.poll(() => page.textContent("#ready-text")).toContain("scripted-test");
      if (expected) {
        expect(await page.isVisible("#model-note")).toBe(true);
        expect(await page.textContent("#model-note")).toContain(expected);
      } else {
        expect(await page.isVisible("#model-note")).toBe(false);
      }
      await page.close();
      await t.cleanup();
      t = undefined;
    }
  });
});
