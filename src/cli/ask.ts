/**
 * `reex ask`: answers one question over one SQLite file with the same runtime the server uses,
 * printing the probes and their results as they happen, then the final SQL and its result.
 */
import { parseArgs } from "node:util";
import { AGENT_DEFAULTS, DECODING_DEFAULTS, FEEDBACK_MODES, PROFILE_IDS, STRATEGIES, loadConfig, splitSettings, unknownOption } from "../config/index.js";
import { answerStatus, type Answer, type AnswerRequest, type FeedbackMode, type Strategy } from "../decoding/index.js";
import { ReexError } from "../errors/index.js";
import { describeRewrites } from "../agent/index.js";
import type { ReexEvent } from "../events/index.js";
import { formatTable, toJson } from "./exec.js";

/** One-line description shown by `reex --help`. */
export const summary = "answer one question over a SQLite file, showing the probes the model runs";

const USAGE = `usage: reex ask --db PATH "question" [options]

Runs the execution-aware agent on one question and prints the model profile it uses and why, its
trace (probes and their results), the final SQL and the final SQL's result; without a final SQL,
the end of what the model wrote. Exit code 0 when a final SQL ran, 1 otherwise, 2 on
bad usage.

options:
  --db PATH|URL           SQLite database file (opened read-only; not added to the server's
                          registry), or postgres://user@host/db (password as \${ENV_VAR} or PGPASSWORD)
  --evidence TEXT         hint ("evidence" in BIRD) shown to the model
  --model PATH|URI        GGUF file or hf: URI (default: policy.model, else policy.defaultModel)
  --profile ID            the model's protocol: auto | ${PROFILE_IDS.join(" | ")}
                          (default policy.profile; auto reads it off the model's metadata)
  --strategy S            ${STRATEGIES.join(" | ")} (default ${DECODING_DEFAULTS.strategy})
  --candidates N          candidates for linear/tree strategies (default ${DECODING_DEFAULTS.candidates})
  --max-interactions N    probe rounds at most (default ${AGENT_DEFAULTS.maxInteractions})
  --feedback MODE         ${FEEDBACK_MODES.join(" | ")} (default ${AGENT_DEFAULTS.feedback})
  --constrained           restrict output to the tag structure and the schema's identifiers
                          (default: decoding.constrained, "auto": on for the starter model only;
                          --decoding.constrained off turns it off)
  --seed N                sampling seed
  --json                  print the whole answer record as JSON, with the profile and each
                          candidate's whole response (no live trace)
  --config FILE           configuration file (see reex serve --help)
  --section.key VALUE     any setting of reex serve (reex serve --help lists them),
                          e.g. --agent.schemaHints false, --decoding.temperature 0.2
  -h, --help              show this help`;

/** Characters of the model's text shown when it ends without a final SQL. */
const TAIL_CHARS = 400;

function int(flag: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new ReexError("BAD_REQUEST", `${flag} must be a non-negative integer, got "${raw}"`);
  return n;
}

function printEvent(event: ReexEvent, out: (s: string) => void): void {
  switch (event.type) {
    case "probe":
      out(`\n[${event.path}] probe ${event.step}${event.retried ? " (the final SQL, failed, asked again)" : ""}: ${event.sql}\n`);
      break;
    case "repair":
      out(`\n[${event.path}] ${describeRewrites(event)}: ${event.repaired}\n`);
      break;
    case "result":
      out(event.result.ok ? `${formatTable(event.result)}\n` : `${event.result.error.code} (${event.result.error.category}): ${event.result.error.message}\n`);
      break;
    case "rebind":
      out(`\n[${event.path}] FROM drawn again${event.columns.length ? `, held to ${event.columns.join(", ")}` : ""}: `);
      break;
    case "prune":
      out(`[${event.path}] pruned: ${event.reason}\n`);
      break;
    case "error":
      out(`[${event.path ?? "request"}] ${event.code}: ${event.message}\n`);
      break;
    default:
      break;
  }
}

/** The end of the winning (else first) candidate's response, injected feedback included, marked when cut. */
function modelTail(answer: Answer): string {
  const text = (answer.candidates[answer.winner ?? 0] ?? answer.candidates[0])?.text ?? "";
  if (text.length === 0) return "The model wrote nothing.";
  if (text.trim().length === 0) return `The model wrote only whitespace: ${JSON.stringify(text.slice(-TAIL_CHARS))}`;
  const chars = [...text];
  const cut = chars.length > TAIL_CHARS;
  const tail = chars.slice(-TAIL_CHARS).join("");
  return `The model wrote${cut ? ` (its last ${TAIL_CHARS} of ${chars.length} characters)` : ""}:\n${cut ? "…" : ""}${tail}`;
}

/** Runs `reex ask`; returns the exit code. */
export async function run(argv: string[]): Promise<number> {
  let parsed;
  let settings;
  try {
    settings = splitSettings(argv);
    parsed = parseArgs({
      args: settings.rest,
      allowPositionals: true,
      options: {
        db: { type: "string" },
        evidence: { type: "string" },
        model: { type: "string" },
        profile: { type: "string" },
        strategy: { type: "string" },
        candidates: { type: "string" },
        "max-interactions": { type: "string" },
        feedback: { type: "string" },
        constrained: { type: "boolean" },
        seed: { type: "string" },
        json: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (err) {
    const e = err as Error & { code?: string };
    const unknown = e.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" ? /'(-[^']*)'/.exec(e.message)?.[1] : undefined;
    console.error(`reex ask: ${unknown ? unknownOption(unknown).message : e.message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const question = positionals.join(" ").trim();
  if (!values.db || !question) {
    console.error(`reex ask: --db and a question are required\n\n${USAGE}`);
    return 2;
  }
  if (values.feedback !== undefined && !(FEEDBACK_MODES as readonly string[]).includes(values.feedback)) {
    console.error(`reex ask: --feedback must be one of ${FEEDBACK_MODES.join(", ")}`);
    return 2;
  }
  if (values.strategy !== undefined && !(STRATEGIES as readonly string[]).includes(values.strategy)) {
    console.error(`reex ask: --strategy must be one of ${STRATEGIES.join(", ")}`);
    return 2;
  }

  if (values.profile !== undefined && values.profile !== "auto" && !(PROFILE_IDS as readonly string[]).includes(values.profile)) {
    console.error(`reex ask: --profile must be auto or one of ${PROFILE_IDS.join(", ")}`);
    return 2;
  }
  const requestedProfile = values.profile !== undefined && values.profile !== "auto" ? values.profile : undefined;

  const candidates = int("--candidates", values.candidates);
  const maxInteractions = int("--max-interactions", values["max-interactions"]);
  const seed = int("--seed", values.seed);
  const flags: Record<string, string> = { ...settings.flags };
  if (values.model) flags["policy.model"] = values.model;
  const config = loadConfig({ env: process.env, flags, ...(settings.file !== undefined ? { file: settings.file } : {}) });
  const { isPostgresSetting } = await import("../pg/index.js");
  const postgres = isPostgresSetting(values.db) ? [values.db] : [];
  const { checkDatabasePath } = await import("../sql/index.js");
  // checked as a registration would be, but not registered: one question leaves the server's list as it was
  const fileEntry = postgres.length > 0 ? undefined : checkDatabasePath(values.db);
  const { createRuntime } = await import("../runtime/index.js");
  // the profile goes to stdout with the answer, so its start-up line is not repeated on stderr
  const runtime = await createRuntime(config, {
    examples: false,
    postgres,
    log: values.json ? undefined : (m) => void (m.startsWith("profile ") || console.error(`reex: ${m}`)),
  });
  const entry = fileEntry ?? { path: runtime.postgres[runtime.postgres.length - 1]!.key };
  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once("SIGINT", onSignal);
  try {
    const request: AnswerRequest = {
      dbPath: entry.path,
      question,
      ...(values.evidence ? { evidence: values.evidence } : {}),
      ...(requestedProfile ? { profile: requestedProfile } : {}),
      ...(values.strategy ? { strategy: values.strategy as Strategy } : {}),
      ...(candidates !== undefined ? { candidates } : {}),
      ...(maxInteractions !== undefined ? { maxInteractions } : {}),
      ...(values.feedback ? { feedback: values.feedback as FeedbackMode } : {}),
      ...(seed !== undefined ? { seed } : {}),
      ...(values.constrained ? { constrained: true } : {}),
    };
    const profile = requestedProfile ? { id: requestedProfile, reason: "set by --profile" } : runtime.profile;
    const out = (s: string): void => void process.stdout.write(s);
    if (!values.json) out(`profile: ${profile.id} (${profile.reason})\n`);
    const answer: Answer = await runtime.decode(request, {
      signal: controller.signal,
      ...(values.json ? {} : { sink: (e: ReexEvent) => printEvent(e, out) }),
    });
    const status = answerStatus(answer);
    if (values.json) {
      console.log(toJson({ ...answer, ...status, profile }));
    } else {
      printAnswer(answer, status.answerable, out);
    }
    return answer.sql !== null && answer.result?.ok ? 0 : 1;
  } finally {
    process.off("SIGINT", onSignal);
    await runtime.close();
  }
}

/** The answer as `reex ask` prints it: the final SQL and its rows (or why there are none), its confidence, notices and cost. */
function printAnswer(answer: Answer, answerable: boolean, out: (text: string) => void): void {
  out("\n");
  if (!answer.answerable) out(`The model says the question cannot be answered from this database${answer.reason ? `: ${answer.reason}` : "."}\n`);
  else if (answer.sql === null) out(`No final SQL was produced. ${modelTail(answer)}\n`);
  else {
    out(`final SQL: ${answer.sql}\n`);
    if (answer.result?.ok) out(`${formatTable(answer.result)}\n`);
    else if (answer.result) out(`${answer.result.error.code} (${answer.result.error.category}): ${answer.result.error.message}\n`);
  }
  if (answer.confidence && answer.sql !== null && answer.result?.ok) {
    const c = answer.confidence;
    out(
      `confidence: ${c.value.toFixed(2)}${answerable ? "" : ` (below ${c.threshold}: not marked answerable)`}${c.doubts.length > 0 ? `; ${c.doubts.join("; ")}` : ""}\n`,
    );
  }
  if (answer.notice !== undefined) out(`note: ${answer.notice}\n`);
  if (answer.candidates.length > 1) out(`${answer.candidates.length} candidates; winner #${answer.winner ?? "-"}\n`);
  out(
    `tokens: ${answer.usage.promptTokens} prompt, ${answer.usage.evaluatedTokens} evaluated, ${answer.usage.generatedTokens} generated; ${Math.round(answer.timings.totalMs)} ms\n`,
  );
}
