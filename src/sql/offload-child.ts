/**
 * Entry point of a prompt-preparation child process (forked by ./offload.ts): the work on a
 * database that can take seconds for a large one, kept off the server's event loop.
 *   parent → child  [id, "schema", dbPath] | [id, "index", dbPath, options]
 *                   | [id, "prompt", dbPath, promptOptions]
 *   child → parent  [id, 1, result] | [id, 0, code, message]
 */
import { ReexError } from "../errors/index.js";
import { validateDatabaseFile } from "./registry.js";
import { loadSchema } from "./schema.js";
import { schemaPrompt, type SchemaPromptOptions } from "./schema-prompt.js";
import { buildValueIndexFile, type ValueIndexOptions } from "./values.js";

type Request =
  | [id: number, op: "validate", dbPath: string]
  | [id: number, op: "schema", dbPath: string]
  | [id: number, op: "index", dbPath: string, options: ValueIndexOptions]
  | [id: number, op: "prompt", dbPath: string, options: SchemaPromptOptions];

const send = process.send?.bind(process);
if (!send) {
  console.error("offload-child: must be started by src/sql/offload.ts (child_process.fork)");
  process.exit(2);
}

process.on("message", (m: Request) => {
  const id = m[0];
  try {
    if (m[1] === "validate") send([id, 1, validateDatabaseFile(m[2])]);
    else if (m[1] === "schema") send([id, 1, loadSchema(m[2])]);
    else if (m[1] === "index") send([id, 1, buildValueIndexFile(m[2], m[3])]);
    else send([id, 1, schemaPrompt(loadSchema(m[2]), m[3]).text]);
  } catch (err) {
    send([id, 0, err instanceof ReexError ? err.code : "INTERNAL", (err as Error).message]);
  }
});

process.on("disconnect", () => process.exit(0));
