/**
 * Wires the real parts from one parsed {@link Config}: the database registry (with the example
 * databases registered), the executor pool, the policy and the decoder. The server, `reex ask`
 * and `reex eval` all start from here, so they run the same code.
 */
import { join } from "node:path";
import type { ProfileId } from "../agent/index.js";
import type { Config } from "../config/index.js";
import { createDecoder } from "../decoding/index.js";
import type { Decode } from "../decoding/index.js";
import { buildExamples } from "../examples/index.js";
import { ReexError } from "../errors/index.js";
import { createLlamaPolicy, createRemotePolicy } from "../policy/index.js";
import type { Policy } from "../policy/index.js";
import { openPostgresSource, parseSourceSetting, type PostgresSource } from "../pg/index.js";
import { DatabaseRegistry, ExecutorPool, loadSchema, unregisterSource } from "../sql/index.js";
import type { DatabaseEntry } from "../sql/index.js";
import { PLACEHOLDER_MODEL, resolveModel, STARTER_MODEL, type ResolvedModel } from "./model.js";

/** What every front end says of an answer the placeholder model wrote. */
const PLACEHOLDER_NOTICE = `answered by a random-weight placeholder model (${PLACEHOLDER_MODEL}; no ${STARTER_MODEL} was found): its SQL is noise. Set policy.model to a text-to-SQL GGUF`;

export { STARTER_MODEL } from "./model.js";

/** Everything a front end runs on, with one close for all of it. */
export interface Runtime {
  config: Config;
  registry: DatabaseRegistry;
  executor: ExecutorPool;
  policy: Policy;
  decode: Decode;
  /** The schema shown by GET /v1/databases/:id. */
  describe: (entry: DatabaseEntry) => unknown;
  /** The PostgreSQL sources connected from `sql.postgres` and {@link RuntimeOptions.postgres}, in that order. */
  postgres: PostgresSource[];
  /** Which model file was loaded and why. */
  model: ResolvedModel;
  /** The profile requests get when they name none, and why: `policy.profile`, or detected from the model's metadata. */
  profile: { id: ProfileId; reason: string };
  /** Whether requests that do not say are decoded constrained (`decoding.constrained` resolved against the model). */
  constrained: boolean;
  close(): Promise<void>;
}

/** Options beyond the config: progress output and whether to register the example databases. */
interface RuntimeOptions {
  /** Register examples/ databases (built if missing). Default true. */
  examples?: boolean;
  /** Progress and warnings for a person watching start-up. Default: none. */
  log?: (message: string) => void;
  /** PostgreSQL sources to connect besides `sql.postgres` (`--db postgres://…`), as `[name=]postgres://…`. Default none. */
  postgres?: string[];
}

/**
 * Connects each `[name=]postgres://…` setting (schema and values snapshot read at once) and lists
 * it in `registry`; closes those already open and throws DB_UNREACHABLE or CONFIG_INVALID if one fails.
 */
async function connectPostgres(config: Config, registry: DatabaseRegistry, settings: string[], log?: (m: string) => void): Promise<PostgresSource[]> {
  const sources: PostgresSource[] = [];
  try {
    for (const setting of settings) {
      const { name, url } = parseSourceSetting(setting);
      const source = await openPostgresSource({
        url,
        name,
        poolSize: config.sql.workers * 2,
        timeoutMs: config.sql.timeoutMs,
        maxRows: config.sql.maxRows,
        snapshotDir: join(config.sql.dataDir, "pg"),
        allowFunctions: config.sql.postgresFunctions,
      });
      sources.push(source);
      const tables = (source.schema?.tables ?? []).map((t) => t.name);
      const entry = registry.registerSource({ key: source.key, name: source.name, tables });
      log?.(`connected PostgreSQL database ${entry.name} (${entry.id}, ${tables.length} tables)`);
    }
  } catch (err) {
    await closePostgres(sources);
    throw err;
  }
  return sources;
}

async function closePostgres(sources: PostgresSource[]): Promise<void> {
  for (const s of sources) unregisterSource(s.key);
  await Promise.allSettled(sources.map((s) => s.close()));
}

/** Builds the runtime for `config`; closes what it opened if any step fails. */
export async function createRuntime(config: Config, options: RuntimeOptions = {}): Promise<Runtime> {
  const log = options.log;
  const registry = new DatabaseRegistry({
    dataDir: config.sql.dataDir,
    allowedRoots: config.server.allowedRoots.length ? config.server.allowedRoots : undefined,
    uploadQuotaPerOwner: config.server.uploadQuotaBytesPerKey,
    uploadQuotaTotal: config.server.uploadQuotaBytes,
    ...(log ? { onWarning: (message: string) => log(`warning: ${message}`) } : {}),
  });
  if (options.examples ?? true) {
    const sets = await buildExamples();
    for (const set of sets) await registry.registerPath(set.path, { name: set.dbId });
    log?.(`registered ${sets.length} example databases: ${sets.map((s) => s.dbId).join(", ")}`);
  }
  const postgres = await connectPostgres(config, registry, [...config.sql.postgres, ...(options.postgres ?? [])], log);
  const executor = new ExecutorPool({
    workers: config.sql.workers,
    timeoutMs: config.sql.timeoutMs,
    maxRows: config.sql.maxRows,
    maxQueryMemoryMB: config.sql.maxQueryMemoryMB,
  });
  let policy: Policy | undefined;
  try {
    let model: Runtime["model"];
    if (config.policy.backend === "remote") {
      // A remote OpenAI-compatible completions endpoint (docs/scale-out.md); no local model file.
      const url = config.policy.remoteUrl;
      if (!url) throw new ReexError("CONFIG_INVALID", 'policy.backend is "remote" but policy.remoteUrl is not set');
      log?.(`using the remote policy at ${url}`);
      policy = await createRemotePolicy({
        url,
        timeoutMs: config.policy.remoteTimeoutMs,
        ...(config.policy.remoteModel !== undefined ? { model: config.policy.remoteModel } : {}),
        ...(config.policy.remoteApiKey !== undefined ? { apiKey: config.policy.remoteApiKey } : {}),
        ...(config.policy.remoteChatTemplate !== undefined ? { chatTemplate: config.policy.remoteChatTemplate } : {}),
        ...(log ? { log } : {}),
      });
      model = { path: `${url} (${policy.info.model})`, origin: "configured", reason: "policy.remoteUrl" };
    } else {
      model = await resolveModel(config, log);
      log?.(`loading model ${model.path} (${model.origin}, gpu=${config.policy.gpu})`);
      policy = await createLlamaPolicy({
        model: model.path,
        modelsDir: config.policy.modelsDir,
        downloadTimeoutMs: config.policy.downloadTimeoutMs,
        ...(log ? { onDownloadLog: log } : {}),
        gpu: config.policy.gpu,
        contextSize: config.policy.contextSize,
        sequences: config.policy.sequences,
        lora: config.policy.lora,
        ...(config.policy.threads !== undefined ? { threads: config.policy.threads } : {}),
        ...(config.policy.flashAttention !== undefined ? { flashAttention: config.policy.flashAttention } : {}),
        speculative: config.decoding.speculative,
        draftMax: config.decoding.draftMax,
        draftHistory: config.decoding.draftHistory,
        draftShape: config.decoding.draftShape,
      });
    }
    log?.(`model ready on ${policy.info.device}: context ${policy.info.contextSize} × ${policy.info.maxSequences} sequences`);
    const decode = createDecoder({ policy, executor, config, indexDir: join(config.sql.dataDir, "indexes") });
    log?.(`profile ${decode.profile.profile.id}: ${decode.profile.reason}`);
    if (decode.constrained) log?.(`constrained decoding on by default (decoding.constrained ${config.decoding.constrained})`);
    const loaded = policy;
    const placeholder = model.origin === "placeholder";
    return {
      config,
      registry,
      executor,
      policy: loaded,
      decode: placeholder ? async (request, ctx) => ({ ...(await decode(request, ctx)), notice: PLACEHOLDER_NOTICE }) : decode,
      describe: (entry) => loadSchema(entry.path),
      postgres,
      model,
      profile: { id: decode.profile.profile.id, reason: decode.profile.reason },
      constrained: decode.constrained,
      async close() {
        await Promise.allSettled([loaded.close(), executor.close(), closePostgres(postgres)]);
      },
    };
  } catch (err) {
    await Promise.allSettled([policy?.close(), executor.close(), closePostgres(postgres)]);
    throw err;
  }
}
