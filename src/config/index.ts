/**
 * The one configuration object of reex: a zod schema with every default, parsed once at start-up
 * from a JSON file, then REEX_* environment variables, then command-line flags (later wins).
 * Unknown keys are rejected. No other module reads process.env.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { ReexError, issuesFrom } from "../errors/index.js";
import { agentSchema, configSchema, decodingSchema, policySchema, serverSchema, sqlSchema, teachSchema, type Config } from "./schema.js";

export {
  DECIDED_BY,
  FEEDBACK_MODES,
  PROFILE_IDS,
  PROMPT_FAMILIES,
  STRATEGIES,
  type DecidedBy,
  type FeedbackMode,
  type ProfileId,
  type PromptFamily,
  type SpeculativeMode,
  type Strategy,
} from "./vocabulary.js";

export { AGENT_DEFAULTS, DECODING_DEFAULTS, TEACH_DEFAULTS, type Config } from "./schema.js";

/** Parses a config object, throwing CONFIG_INVALID with one issue per problem. */
export function parseConfig(input: unknown): Config {
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    throw new ReexError("CONFIG_INVALID", "invalid configuration", { issues: issuesFrom(parsed.error.issues) });
  }
  return parsed.data;
}

/** Every settable key as `section.key`, with its zod type, for env/flag parsing and `--help`. */
function configKeys(): { key: string; section: string; field: string; schema: z.ZodType }[] {
  const out: { key: string; section: string; field: string; schema: z.ZodType }[] = [];
  const sections = { server: serverSchema, sql: sqlSchema, policy: policySchema, agent: agentSchema, decoding: decodingSchema, teach: teachSchema };
  for (const [section, schema] of Object.entries(sections)) {
    for (const [field, fieldSchema] of Object.entries(schema.shape)) {
      out.push({ key: `${section}.${field}`, section, field, schema: fieldSchema as z.ZodType });
    }
  }
  return out;
}

function baseType(schema: z.ZodType): string {
  let s: z.ZodType = schema;
  for (;;) {
    const def = (s as unknown as { def: { type: string; innerType?: z.ZodType } }).def;
    if ((def.type === "default" || def.type === "optional") && def.innerType) s = def.innerType;
    else return def.type;
  }
}

/**
 * A list from a flag or environment variable: a JSON array when the text starts with `[` (so
 * `'["k1","k2"]'` is two keys, not one), else comma-separated items.
 */
function listOf(raw: string, key: string): unknown {
  const text = raw.trim();
  if (!text.startsWith("[")) return text === "" ? [] : text.split(",").map((s) => s.trim());
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ReexError(
      "CONFIG_INVALID",
      `${key}: a list starting with "[" must be a JSON array (${(err as Error).message}); or give items separated by commas`,
      {
        issues: [{ path: key.split("."), message: "not a JSON array" }],
      },
    );
  }
}

function coerce(raw: string, key: string, schema: z.ZodType): unknown {
  const type = baseType(schema);
  if (type === "number") return Number(raw);
  if (type === "boolean") return raw === "true" || raw === "1" ? true : raw === "false" || raw === "0" ? false : raw;
  if (type === "array") return listOf(raw, key);
  return raw;
}

function setPath(target: Record<string, Record<string, unknown>>, section: string, field: string, value: unknown): void {
  (target[section] ??= {})[field] = value;
}

/** Environment variable name of a key: `server.port` → `REEX_SERVER_PORT`. */
function envName(key: string): string {
  return (
    "REEX_" +
    key
      .replace(/\./g, "_")
      .replace(/([a-z])([A-Z])/g, "$1_$2")
      .toUpperCase()
  );
}

/** Flag name of a key: `server.port` → `--server.port`. */
function flagName(key: string): string {
  return `--${key}`;
}

/**
 * Builds the configuration: defaults ← JSON file (`--config FILE` or REEX_CONFIG) ← REEX_*
 * environment variables ← `--section.key value` flags. Throws CONFIG_INVALID on any problem,
 * including unknown keys and flags.
 */
export function loadConfig(options: { env?: NodeJS.ProcessEnv; flags?: Record<string, string>; file?: string } = {}): Config {
  const env = options.env ?? {};
  const merged: Record<string, Record<string, unknown>> = {};
  const file = options.file ?? env.REEX_CONFIG;
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new ReexError("CONFIG_INVALID", `cannot read config file ${file}: ${(err as Error).message}`);
    }
    try {
      Object.assign(merged, JSON.parse(text));
    } catch (err) {
      throw new ReexError("CONFIG_INVALID", `config file ${file} is not valid JSON: ${(err as Error).message}`);
    }
  }
  const keys = configKeys();
  for (const k of keys) {
    const raw = env[envName(k.key)];
    if (raw !== undefined) setPath(merged, k.section, k.field, coerce(raw, k.key, k.schema));
  }
  for (const [flag, raw] of Object.entries(options.flags ?? {})) {
    const k = keys.find((c) => c.key === flag);
    if (!k) throw unknownOption(flag);
    setPath(merged, k.section, k.field, coerce(raw, k.key, k.schema));
  }
  return parseConfig(merged);
}

/** The settings found on one command line, and the arguments left for the command itself. */
interface SettingsArgs {
  /** `--section.key` flags by key, values as typed (a bare boolean flag is "true"). */
  flags: Record<string, string>;
  /** `--config FILE`, when given. */
  file?: string;
  /** Every other argument, in order, for the command's own options and positionals. */
  rest: string[];
}

const BOOLEAN_TEXT = new Set(["true", "false", "1", "0"]);

/**
 * Takes the settings out of a command line, the one way every command reads them:
 * `--section.key value`, `--section.key=value` and `--config FILE`. A boolean key takes the next
 * argument only when it reads true/false/1/0, so `--agent.schemaHints "a question"` leaves the
 * question alone; any other key needs a value. Unknown keys are left to {@link loadConfig}.
 */
export function splitSettings(argv: readonly string[]): SettingsArgs {
  const out: SettingsArgs = { flags: {}, rest: [] };
  const keys = new Map(configKeys().map((k) => [k.key, k]));
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--(config|[A-Za-z]+\.[A-Za-z]+)(?:=([\s\S]*))?$/.exec(arg);
    if (!m) {
      out.rest.push(arg);
      continue;
    }
    const name = m[1]!;
    let value = m[2];
    if (value === undefined) {
      const next = argv[i + 1];
      const k = keys.get(name);
      if (k && baseType(k.schema) === "boolean") {
        if (next !== undefined && BOOLEAN_TEXT.has(next)) {
          value = next;
          i++;
        } else value = "true";
      } else {
        if (next === undefined || next.startsWith("--"))
          throw new ReexError("CONFIG_INVALID", `${arg} needs a value`, { issues: [{ path: name.split("."), message: "missing value" }] });
        value = next;
        i++;
      }
    }
    if (name === "config") out.file = value;
    else out.flags[name] = value;
  }
  return out;
}

/** The settings flags that `name` (an unknown option, without its dashes) most likely meant: `port` → `--server.port`. Default []. */
function suggestFlags(name: string): string[] {
  const wanted = name.replace(/^-+/, "").split("=")[0]!.toLowerCase();
  const keys = configKeys();
  const byField = keys.filter((k) => k.field.toLowerCase() === wanted || k.key.toLowerCase() === wanted);
  if (byField.length > 0) return byField.map((k) => flagName(k.key));
  const field = wanted.includes(".") ? wanted.slice(wanted.indexOf(".") + 1) : wanted;
  const near = keys
    .map((k) => ({ k, d: Math.min(editDistance(k.key.toLowerCase(), wanted), editDistance(k.field.toLowerCase(), field)) }))
    .filter((x) => x.d <= 2)
    .sort((a, b) => a.d - b.d);
  return near.slice(0, 3).map((x) => flagName(x.k.key));
}

/** An unknown option as CONFIG_INVALID, with "did you mean" when a settings flag is close. */
export function unknownOption(arg: string): ReexError {
  const name = arg.replace(/^-+/, "").split("=")[0]!;
  const hints = suggestFlags(name);
  return new ReexError("CONFIG_INVALID", `unknown option --${name}${hints.length ? ` (did you mean ${hints.join(" or ")}?)` : ""}`, {
    issues: [{ path: name.split("."), message: "unknown option" }],
  });
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length]!;
}

/** A `--help` listing: every key with its flag, environment variable and default. */
export function configHelp(): string {
  const defaults = parseConfig({}) as unknown as Record<string, Record<string, unknown>>;
  return configKeys()
    .map((k) => {
      const d = defaults[k.section]?.[k.field];
      const shown = d === undefined ? "(none)" : JSON.stringify(d);
      const list = baseType(k.schema) === "array" ? "  (a list: a,b,c or a JSON array)" : "";
      return `  ${flagName(k.key).padEnd(34)} ${envName(k.key).padEnd(34)} default ${shown}${list}`;
    })
    .join("\n");
}
