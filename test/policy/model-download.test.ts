/**
 * `policy.model hf:…` without a network (issue #83): the model host is asked first with a connect
 * timeout, so a refused or silent host fails in about the timeout with MODEL_NOT_FOUND and advice,
 * instead of node-llama-cpp's downloader retrying for minutes without a word; a download says where
 * it comes from and that it finished. Everything here talks to local sockets only: a closed port,
 * a server that accepts and never answers, and a small HTTP server standing in for Hugging Face.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createTcpServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createLlamaPolicy } from "../../src/policy/index.js";
import { resolveModelUri } from "../../src/policy/testing.js";

/** Where node-llama-cpp keeps `hf:someone/some-model/model-q4.gguf` in the models folder. */
const LOCAL_NAME = "hf_someone_some-model_model-q4.gguf";
let dir: string;
const closers: (() => Promise<void>)[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-download-"));
});
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  rmSync(dir, { recursive: true, force: true });
});

/** A local port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** A server that accepts connections and never answers. */
async function silentPort(): Promise<number> {
  const sockets = new Set<Socket>();
  const server = createTcpServer((s) => sockets.add(s));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  closers.push(
    () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  );
  return (server.address() as { port: number }).port;
}

/** A stand-in for Hugging Face serving `body` at every `/<owner>/<repo>/resolve/main/<file>`. */
async function fakeHub(body: Buffer): Promise<{ url: string; requests: string[] }> {
  const requests: string[] = [];
  const server: Server = createHttpServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    if (!req.url?.includes("/resolve/")) {
      res.writeHead(200).end();
      return;
    }
    const range = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
    const start = range ? Number(range[1]) : 0;
    const end = range?.[2] ? Number(range[2]) : body.length - 1;
    const part = body.subarray(start, end + 1);
    const headers = { "content-length": String(part.length), "accept-ranges": "bytes", "content-type": "application/octet-stream" };
    if (range) res.writeHead(206, { ...headers, "content-range": `bytes ${start}-${end}/${body.length}` });
    else res.writeHead(200, headers);
    res.end(req.method === "HEAD" ? undefined : part);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  closers.push(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/`, requests };
}

describe("model URIs without a network", () => {
  it("fail at once with MODEL_NOT_FOUND when the host refuses the connection", async () => {
    const endpoint = `http://127.0.0.1:${await closedPort()}/`;
    const lines: string[] = [];
    const t0 = Date.now();
    const err = await resolveModelUri("hf:someone/some-model/model-q4.gguf", {
      directory: dir,
      timeoutMs: 5_000,
      huggingFaceEndpoint: endpoint,
      log: (l) => lines.push(l),
    }).catch((e: unknown) => e);
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(err).toMatchObject({ code: "MODEL_NOT_FOUND" });
    expect((err as Error).message).toMatch(/could not be reached/);
    expect((err as Error).message).toMatch(/set policy\.model to its path/);
    expect(lines[0]).toMatch(/^downloading hf:someone\/some-model\/model-q4\.gguf from http:\/\/127\.0\.0\.1:\d+ into /);
  });

  it("fail after the timeout with MODEL_NOT_FOUND when the host never answers", async () => {
    const endpoint = `http://127.0.0.1:${await silentPort()}/`;
    const t0 = Date.now();
    const err = await resolveModelUri("hf:someone/some-model/model-q4.gguf", { directory: dir, timeoutMs: 400, huggingFaceEndpoint: endpoint }).catch(
      (e: unknown) => e,
    );
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(350);
    expect(took).toBeLessThan(3_000);
    expect(err).toMatchObject({ code: "MODEL_NOT_FOUND", message: expect.stringMatching(/no answer within 400 ms \(policy\.downloadTimeoutMs\)/) });
  });

  it("through createLlamaPolicy, as `reex serve --policy.model hf:…` loads it, before llama.cpp is touched", async () => {
    const endpoint = `http://127.0.0.1:${await closedPort()}/`;
    const saved = process.env.HF_ENDPOINT;
    process.env.HF_ENDPOINT = endpoint;
    try {
      await expect(createLlamaPolicy({ model: "hf:someone/some-model/model-q4.gguf", modelsDir: dir, downloadTimeoutMs: 2_000 })).rejects.toMatchObject({
        code: "MODEL_NOT_FOUND",
      });
    } finally {
      if (saved === undefined) delete process.env.HF_ENDPOINT;
      else process.env.HF_ENDPOINT = saved;
    }
  });

  it("use a file already in the models folder without asking the host", async () => {
    // node-llama-cpp's name for a downloaded hf: file
    writeFileSync(join(dir, LOCAL_NAME), "GGUF");
    const endpoint = `http://127.0.0.1:${await closedPort()}/`;
    await expect(resolveModelUri("hf:someone/some-model/model-q4.gguf", { directory: dir, timeoutMs: 1_000, huggingFaceEndpoint: endpoint })).resolves.toBe(
      join(dir, LOCAL_NAME),
    );
  });

  it("say MODEL_NOT_FOUND without the network when downloading is off", async () => {
    await expect(resolveModelUri("hf:someone/some-model/model-q4.gguf", { directory: dir, timeoutMs: 1_000, download: false })).rejects.toMatchObject({
      code: "MODEL_NOT_FOUND",
      message: expect.stringMatching(/downloading is off/),
    });
  });

  it("download from a reachable host with progress lines and a last line that says where the file is", async () => {
    const body = Buffer.alloc(256 * 1024, 7);
    const hub = await fakeHub(body);
    const lines: string[] = [];
    const bytes: number[] = [];
    const path = await resolveModelUri("hf:someone/some-model/model-q4.gguf", {
      directory: dir,
      timeoutMs: 5_000,
      huggingFaceEndpoint: hub.url,
      log: (l) => lines.push(l),
      onProgress: (p) => bytes.push(p.downloadedBytes),
    });
    expect(path).toBe(join(dir, LOCAL_NAME));
    expect(hub.requests.some((r) => r.includes("/someone/some-model/resolve/main/model-q4.gguf"))).toBe(true);
    expect(lines[0]).toMatch(/^downloading hf:someone\/some-model\/model-q4\.gguf from http:\/\/127\.0\.0\.1/);
    expect(lines.some((l) => /downloading hf:\S+: \d+% \(/.test(l))).toBe(true);
    expect(lines.at(-1)).toBe(`downloaded hf:someone/some-model/model-q4.gguf to ${path}`);
    expect(bytes.at(-1)).toBe(body.length);
  });
});
