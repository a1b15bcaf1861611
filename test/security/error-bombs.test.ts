/**
 * Error messages cannot stall or flood the server (issue #83, items 1 and 9). SQLite and PostgreSQL
 * echo bad input in their errors, so one short query can make a message hundreds of KB long; the
 * old redaction was quadratic in it (`postgres://a` 32,000 times: 25 s of main thread). Now every
 * message is capped at MAX_MESSAGE_BYTES where it is made (the cut said in the text) and redaction
 * is linear: a 1 MB message of any shape redacts in well under a second, the reproduction through
 * MCP `run_sql` on a real server answers in under 2 s with a message of at most 8 KiB while
 * `/healthz` keeps answering, and a mistyped database URL is never shown whole.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capMessage, redactSecrets, ReexError } from "../../src/errors/index.js";
import { MAX_MESSAGE_BYTES } from "../../src/errors/testing.js";
import { checkDatabasePath, DatabaseRegistry, ExecutorPool, sqlScopes } from "../../src/sql/index.js";
import { lexicalRefusal } from "../../src/sql/testing.js";
import { listen, makeApp, type TestApp } from "../server/helpers.js";

/** The probe's reproduction: a JSON path error that echoes a 384 KB path of `postgres://a`. */
const JSON_PATH_BOMB = "SELECT json_extract(json_object(), replace(hex(zeroblob(32000)), '00', 'postgres://a'))";
const SECRET = "pw-Sekr1t-83";
const MiB = 1024 * 1024;

const bytes = (text: string): number => Buffer.byteLength(text, "utf8");

function timed<T>(f: () => T): { value: T; ms: number } {
  const t0 = performance.now();
  const value = f();
  return { value, ms: performance.now() - t0 };
}

describe("redaction is linear and messages are capped", () => {
  it("a 1 MB message of every shape that made the old expressions backtrack redacts in well under a second", () => {
    const shapes: [string, string][] = [
      ["postgres://a repeated", "postgres://a".repeat(MiB / 12)],
      ["postgres://a: repeated (a user name with no @)", "postgres://a:".repeat(MiB / 13)],
      ["scheme://u:p@ repeated", `x://u:${SECRET}@`.repeat(MiB / 20)],
      ["password=' repeated (no closing quote)", "password='".repeat(MiB / 10)],
      ["password= with spaces", "password=  ".repeat(MiB / 11)],
      ["one long token with ?password= at the end", `${"postgres://u@h/db".repeat(MiB / 17)}?password=${SECRET}`],
      ["colons and slashes", ":/".repeat(MiB / 2)],
    ];
    for (const [what, text] of shapes) {
      const { value, ms } = timed(() => redactSecrets(text));
      console.log(`redactSecrets, ${what}: ${(text.length / MiB).toFixed(2)} M chars in ${ms.toFixed(1)} ms`);
      expect(ms, what).toBeLessThan(1000);
      expect(value, what).not.toContain(SECRET);
    }
  });

  it("the reproduction's 384 KB message becomes at most MAX_MESSAGE_BYTES, the cut said in the text, at once", () => {
    const message = `bad JSON path: '${"postgres://a".repeat(32000)}'`;
    const { value: error, ms } = timed(() => new ReexError("SQL_RUNTIME", message));
    console.log(`ReexError of the 384 KB reproduction message: ${ms.toFixed(2)} ms, ${bytes(error.message)} bytes`);
    expect(ms).toBeLessThan(100);
    expect(bytes(error.message)).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    expect(error.message).toMatch(/\[cut at 8192 bytes\]$/);
    const huge = Buffer.alloc(100 * MiB, "x").toString("latin1");
    const cut = timed(() => capMessage(huge));
    expect(cut.ms).toBeLessThan(100);
    expect(capMessage(cut.value)).toBe(cut.value);
  });

  it("a cut never leaves half a password: the word it falls in is dropped when it may start a secret", () => {
    const pad = "e".repeat(MAX_MESSAGE_BYTES - 44);
    for (const secret of [`postgres://reader:${SECRET}@host/db`, `host=h password=${SECRET}`, `pg://u:${SECRET}@h`]) {
      const shown = new ReexError("DB_FILE_NOT_FOUND", `${pad} ${secret} and the rest of a long message`).message;
      expect(shown).not.toContain(SECRET.slice(0, 4));
      expect(shown).toMatch(/\[cut at 8192 bytes\]$/);
    }
  });
});

describe("the SQLite side's walkers over deep and long SQL", () => {
  it("the lexical guard and the scope walker answer a 3,000-term expression and 10,000 nested subqueries in well under a second, without throwing", () => {
    for (const sql of [`SELECT ${Array.from({ length: 3000 }, () => "1").join("+")}`, `SELECT ${"(SELECT ".repeat(10_000)}1${")".repeat(10_000)}`]) {
      const guard = timed(() => lexicalRefusal(sql));
      const scopes = timed(() => sqlScopes(sql));
      console.log(
        `${sql.slice(0, 20)}… (${sql.length} chars): lexical guard ${guard.ms.toFixed(1)} ms, scopes ${scopes.ms.toFixed(1)} ms (${scopes.value.scopes.length} walked)`,
      );
      expect(guard.value).toBeNull();
      expect(guard.ms + scopes.ms).toBeLessThan(1000);
      expect(scopes.value.scopes.length).toBeLessThanOrEqual(100);
    }
  });
});

describe("a mistyped database URL is never shown whole", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "reex-mistyped-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The probe's four forms: spaces around the name's `=`, a libpq string, a wrong scheme, a URL a path normalisation turned into `postgres:/`. */
  const MISTYPED = [
    `x = postgres://reader:${SECRET}@127.0.0.1:5432/shop`,
    `host=127.0.0.1 port=5432 dbname=shop user=reader password=${SECRET}`,
    `pg://reader:${SECRET}@127.0.0.1/shop`,
    `postgres:/reader:${SECRET}@127.0.0.1/shop`,
  ];

  it("redactSecrets hides the password of each form", () => {
    for (const text of MISTYPED) expect(redactSecrets(`no regular file at /srv/${text}`), text).not.toContain(SECRET);
    expect(redactSecrets(`postgres://reader:${SECRET}@h/db`)).toBe("postgres://reader:***@h/db");
    expect(redactSecrets(`host=h password='${SECRET} x' user=u`)).toBe("host=h password='***' user=u");
  });

  it("registering or checking one as a file answers DB_FILE_NOT_FOUND without the value", async () => {
    const registry = new DatabaseRegistry({ dataDir: join(dir, "data") });
    for (const text of MISTYPED) {
      for (const attempt of [() => checkDatabasePath(text), () => registry.registerPath(text)]) {
        const err = await Promise.resolve()
          .then(attempt)
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(err, text).toBeInstanceOf(ReexError);
        expect((err as ReexError).code).toBe("DB_FILE_NOT_FOUND");
        expect((err as ReexError).message, text).not.toContain(SECRET);
        expect((err as ReexError).message, text).not.toContain("127.0.0.1");
        expect((err as ReexError).message).toMatch(/looks like a database URL or connection string/);
      }
    }
    await expect(Promise.resolve().then(() => checkDatabasePath(join(dir, "missing.sqlite")))).rejects.toThrow(/no regular file at .*missing\.sqlite/);
  });

  it("reex exec and reex ask print neither the password nor the host for any form", async () => {
    const run = promisify(execFile);
    const env = { ...process.env, REEX_SQL_DATA_DIR: join(dir, "cli") };
    const outputs = await Promise.all(
      MISTYPED.flatMap((db) => [
        ["exec", "--db", db, "SELECT 1"],
        ["ask", "--db", db, "How many?"],
      ]).map((args) =>
        run(process.execPath, ["--import", "tsx", "src/cli.ts", ...args], { env }).then(
          (r) => ({ code: 0, out: r.stdout + r.stderr, args }),
          (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr, args }),
        ),
      ),
    );
    for (const { code, out, args } of outputs) {
      expect(code, `${args.join(" ")}: ${out}`).not.toBe(0);
      expect(out, args.join(" ")).not.toContain(SECRET);
      expect(out.length).toBeGreaterThan(0);
    }
  }, 120_000);
});

describe("the reproduction through MCP run_sql on a real server", () => {
  let t: TestApp;
  let url: string;
  let executor: ExecutorPool;
  beforeAll(async () => {
    executor = new ExecutorPool({ workers: 2, timeoutMs: 5000, maxQueryMemoryMB: 256 });
    t = await makeApp({ server: { rateLimitPerMinute: 0 }, deps: { executor } });
    ({ url } = await listen(t.app));
  });
  afterAll(async () => {
    await t?.cleanup();
    await executor?.close();
  });

  async function rpc(session: string | undefined, body: unknown): Promise<{ text: string; session: string | null }> {
    const res = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
        ...(session ? { "mcp-session-id": session } : {}),
      },
      body: JSON.stringify(body),
    });
    return { text: await res.text(), session: res.headers.get("mcp-session-id") };
  }

  it("answers a typed error of at most 8 KiB in under 2 s, three at once, while /healthz answers", async () => {
    const init = await rpc(undefined, {
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bombs", version: "1" } },
    });
    const session = init.session!;
    // the executor children start on first use: warm both, so the clock below times the queries, not the start-up
    await Promise.all(
      [101, 102].map((id) =>
        rpc(session, { jsonrpc: "2.0", id, method: "tools/call", params: { name: "run_sql", arguments: { database: t.dbId, sql: "SELECT 1" } } }),
      ),
    );
    let healthMax = 0;
    let stop = false;
    const health = (async () => {
      while (!stop) {
        const t0 = performance.now();
        await (await fetch(`${url}/healthz`)).text();
        healthMax = Math.max(healthMax, performance.now() - t0);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const t0 = performance.now();
    const answers = await Promise.all(
      [1, 2, 3].map((id) =>
        rpc(session, { jsonrpc: "2.0", id, method: "tools/call", params: { name: "run_sql", arguments: { database: t.dbId, sql: JSON_PATH_BOMB } } }),
      ),
    );
    const ms = performance.now() - t0;
    stop = true;
    await health;
    console.log(
      `three run_sql reproductions at once: ${ms.toFixed(0)} ms, answers of ${answers.map((a) => a.text.length).join(", ")} bytes; slowest /healthz ${healthMax.toFixed(0)} ms`,
    );
    expect(ms).toBeLessThan(2000);
    expect(healthMax).toBeLessThan(1000);
    for (const a of answers) {
      expect(a.text.length).toBeLessThan(3 * MAX_MESSAGE_BYTES);
      const data = a.text.split("\n").find((l) => l.startsWith("data: "));
      const msg = JSON.parse(data ? data.slice(6) : a.text) as { result: { isError: boolean; structuredContent: { code: string; message: string } } };
      expect(msg.result.isError).toBe(true);
      expect(msg.result.structuredContent.code).toBe("SQL_RUNTIME");
      expect(bytes(msg.result.structuredContent.message)).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
      expect(msg.result.structuredContent.message).toMatch(/\[cut at 8192 bytes\]$/);
    }
  }, 60_000);

  it("a result whose JSON passes 1 MiB carries its rows in structuredContent only, the text block without them", async () => {
    const init = await rpc(undefined, {
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bombs", version: "1" } },
    });
    const sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 600) SELECT x, printf('%.3000c', 'a') AS pad FROM c";
    const r = await rpc(init.session!, { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "run_sql", arguments: { database: t.dbId, sql } } });
    const data = r.text.split("\n").find((l) => l.startsWith("data: "));
    const msg = JSON.parse(data ? data.slice(6) : r.text) as {
      result: { isError?: boolean; content: { text: string }[]; structuredContent: { rows: unknown[][]; rowCount: number } };
    };
    expect(msg.result.isError).toBeFalsy();
    expect(msg.result.structuredContent.rows).toHaveLength(600);
    const text = msg.result.content[0]!.text;
    expect(text.length).toBeLessThan(10_000);
    expect(JSON.parse(text)).toMatchObject({ rowCount: 600, rows: expect.stringMatching(/^600 rows, in structuredContent only/) });
    expect(r.text.length).toBeLessThan(1.2 * 600 * 3000);
  }, 60_000);
});
