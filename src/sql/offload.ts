/**
 * Work on a database that is slow for a large one (introspecting 1,500 tables, pruning their schema
 * text, building the matched-values index), run in child processes so the server's event loop
 * stays free. Two lanes, each one lazily forked child: index builds (which may take minutes) never
 * hold up schema reads and prompts.
 */
import { fork, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { ReexError, type ErrorCode } from "../errors/index.js";
import { cacheSchema, type DatabaseSchema } from "./schema.js";
import type { SchemaPromptOptions } from "./schema-prompt.js";
import type { ValueIndexOptions } from "./values.js";

type Reply = [id: number, ok: 1, result: unknown] | [id: number, ok: 0, code: ErrorCode, message: string];

function childEntry(): { modulePath: string; execArgv: string[] } {
  const js = fileURLToPath(new URL("./offload-child.js", import.meta.url));
  if (existsSync(js)) return { modulePath: js, execArgv: [] };
  const tsx = createRequire(import.meta.url).resolve("tsx");
  return { modulePath: fileURLToPath(new URL("./offload-child.ts", import.meta.url)), execArgv: ["--import", pathToFileURL(tsx).href] };
}

/** One child process answering requests in order; forked on first use, forked again if it dies. */
class Lane {
  private child: ChildProcess | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  request(message: unknown[]): Promise<unknown> {
    const child = this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      child.ref();
      child.channel?.ref();
      child.send([id, ...message]);
    });
  }

  close(): void {
    this.child?.kill("SIGKILL");
    this.child = undefined;
    this.fail("the prompt worker was closed");
  }

  private start(): ChildProcess {
    if (this.child) return this.child;
    const entry = childEntry();
    const child = fork(entry.modulePath, [], { execArgv: entry.execArgv, serialization: "advanced", stdio: ["ignore", "inherit", "inherit", "ipc"] });
    child.on("message", (reply: Reply) => {
      const waiter = this.pending.get(reply[0]);
      if (!waiter) return;
      this.pending.delete(reply[0]);
      if (this.pending.size === 0) {
        child.unref();
        child.channel?.unref();
      }
      if (reply[1] === 1) waiter.resolve(reply[2]);
      else waiter.reject(new ReexError(reply[2], reply[3]));
    });
    child.on("exit", (code, signal) => {
      if (this.child === child) this.child = undefined;
      this.fail(`the prompt worker exited (${signal ?? `code ${code}`})`);
    });
    this.child = child;
    return child;
  }

  private fail(why: string): void {
    for (const waiter of this.pending.values()) waiter.reject(new ReexError("INTERNAL", why));
    this.pending.clear();
  }
}

/** Schema reads, schema text and value-index builds off the event loop (see the module comment). */
export class OffThread {
  private readonly schemaLane = new Lane();
  private readonly indexLane = new Lane();
  private readonly building = new Map<string, Promise<string>>();

  /** `validateDatabaseFile(dbPath)` (header, quick_check, tables) in a child. */
  async validate(dbPath: string): Promise<{ tables: string[] }> {
    return (await this.schemaLane.request(["validate", dbPath])) as { tables: string[] };
  }

  /** The schema of `dbPath` with 3 example values a column, read in a child and put in this process's loadSchema cache. */
  async schema(dbPath: string): Promise<DatabaseSchema> {
    const schema = (await this.schemaLane.request(["schema", dbPath])) as DatabaseSchema;
    cacheSchema(dbPath, schema);
    return schema;
  }

  /** `schemaPrompt(loadSchema(dbPath), options).text`, computed in a child (the token counter is always the default). */
  async schemaText(dbPath: string, options: Omit<SchemaPromptOptions, "countTokens">): Promise<string> {
    return (await this.schemaLane.request(["prompt", dbPath, options])) as string;
  }

  /** Builds the value-index file of `dbPath` in a child (one build per file at a time); resolves to its path. */
  buildIndex(file: string, dbPath: string, options: ValueIndexOptions): Promise<string> {
    let job = this.building.get(file);
    if (!job) {
      job = (this.indexLane.request(["index", dbPath, options]) as Promise<string>).finally(() => this.building.delete(file));
      this.building.set(file, job);
    }
    return job;
  }

  /** Kills the children; pending requests fail. */
  close(): void {
    this.schemaLane.close();
    this.indexLane.close();
  }
}
