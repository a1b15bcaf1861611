/**
 * `reex serve` as a real process with the tiny GGUF: a SIGTERM while six tree-prune-32 requests
 * are in flight, more than the grace period allows, exits 0 within grace + 5 s, aborts what is
 * left with SHUTTING_DOWN, runs every onClose hook and logs nothing at error level; a request on an
 * open keep-alive socket during the drain gets 503 SHUTTING_DOWN with Connection: close.
 */
import { spawn } from "node:child_process";
import { request as httpRequest, Agent } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureTestModel } from "../helpers/model.js";

/** Fastify's own close timeout defaults to 10 s: a grace this long is what used to skip the onClose hooks. */
const GRACE_MS = 10_000;
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-shutdown-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function post(agent: Agent, port: number, path: string, body: unknown): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = httpRequest(
      { host: "127.0.0.1", port, path, method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(data) } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

describe("reex serve stopping past its grace period", () => {
  it("exits 0 within grace + 5 s with every onClose hook run and no error-level log line", async () => {
    const model = await ensureTestModel();
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "src/cli.ts",
        "serve",
        "--server.port",
        "0",
        "--server.shutdownGraceMs",
        String(GRACE_MS),
        "--policy.model",
        model,
        "--policy.gpu",
        "cpu",
        "--policy.threads",
        "1",
        "--server.maxConcurrent",
        "2",
      ],
      { env: { ...process.env, REEX_SQL_DATA_DIR: join(dir, "data") }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c));
    child.stderr.on("data", (c: Buffer) => (out += c));
    const exited = new Promise<number>((resolve) => child.on("exit", (code) => resolve(code ?? -1)));
    const lines = (): Record<string, any>[] =>
      out
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, any>);
    try {
      const deadline = Date.now() + 90_000;
      while (!lines().some((l) => l.msg === "reex is listening")) {
        if (Date.now() > deadline) throw new Error(`server did not start:\n${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const url = new URL(lines().find((l) => l.msg === "reex is listening")!.url as string);
      const port = Number(url.port);
      const dbs = (await (await fetch(`${url.origin}/v1/databases`)).json()) as { databases: { id: string; name: string }[] };
      const database = dbs.databases.find((d) => d.name === "retail")?.id ?? dbs.databases[0]!.id;

      const agent = new Agent({ keepAlive: true, maxSockets: 16 });
      const question = { database, question: "How many customers placed more than one order?", strategy: "tree-prune", candidates: 32 };
      const inFlight = Array.from({ length: 6 }, () => post(agent, port, "/v1/sql", question));
      while (true) {
        const ready = (await (await fetch(`${url.origin}/readyz`)).json()) as { queue: { running: number } };
        if (ready.queue.running >= 2) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      const t0 = performance.now();
      child.kill("SIGTERM");
      await new Promise((r) => setTimeout(r, 200));
      const late = await post(agent, port, "/v1/sql", question);
      const answers = await Promise.all(inFlight);
      const code = await exited;
      const stopMs = performance.now() - t0;
      agent.destroy();

      expect(late.status).toBe(503);
      expect(JSON.parse(late.body).code).toBe("SHUTTING_DOWN");
      expect(String(late.headers.connection)).toBe("close");
      expect(code, out.slice(-3000)).toBe(0);
      expect(stopMs).toBeLessThan(GRACE_MS + 5000);
      for (const a of answers) expect([200, 503]).toContain(a.status);
      expect(answers.filter((a) => a.status === 503).every((a) => JSON.parse(a.body).code === "SHUTTING_DOWN")).toBe(true);
      expect(
        answers.some((a) => a.status === 503),
        "the work outlasted the grace period",
      ).toBe(true);
      const logged = lines();
      expect(logged.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([]);
      expect(logged.map((l) => l.msg)).toEqual(
        expect.arrayContaining(["shutdown grace period over; aborting in-flight work", "mcp sessions closed", "runtime closed"]),
      );
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  }, 150_000);
});
