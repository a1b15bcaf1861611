/**
 * What a serving engine says about its deployment, read once when the remote policy starts: the
 * served model id and context size (`GET {url}/models`), and from llama-server's `GET /props` the
 * context size, the model file, the chat template and BOS spelling; {@link remoteMetadata} turns
 * them into the `ModelMetadata` that profile detection reads.
 */
import { ReexError } from "../../errors/index.js";
import type { ModelMetadata } from "../types.js";
import { errorText, finite, isRecord, type Endpoint } from "./endpoint.js";
import { SYSTEM_SENTINEL, templateFromRendered, USER_SENTINEL } from "./template.js";

const PROBE_TIMEOUT_MS = 10_000;

/** What the endpoint reported; every field is absent when it did not say. */
export interface EndpointFacts {
  /** The first model id `GET {url}/models` lists. */
  model?: string;
  /** vLLM `max_model_len`, else llama-server `n_ctx`. */
  contextSize?: number;
  /** llama-server `/props` `model_path` (the `-m` argument). */
  modelPath?: string;
  /** llama-server `/props` `chat_template` (the model's Jinja template). */
  chatTemplate?: string;
  /** llama-server `/props` `bos_token`. */
  bosToken?: string;
  /** Why `/models` could not be read (unreachable, rejected key). */
  error?: ReexError;
}

function text(value: unknown): string | undefined {
  return typeof value === "string" && value.length > 0 ? value : undefined;
}

/** Asks `GET {url}/models` and `GET {root}/props` what the deployment serves. */
export async function probeEndpoint(endpoint: Endpoint): Promise<EndpointFacts> {
  const out: EndpointFacts = {};
  const timeoutMs = Math.min(endpoint.timeoutMs, PROBE_TIMEOUT_MS);
  try {
    const models = await endpoint.json(`${endpoint.base}/models`, undefined, { method: "GET", accept: [404, 405], timeoutMs });
    const data = isRecord(models.json) && Array.isArray(models.json.data) ? models.json.data : [];
    const first = data.find(isRecord);
    if (first && typeof first.id === "string") out.model = first.id;
    const maxLen = first ? finite(first.max_model_len) : undefined;
    if (maxLen !== undefined && maxLen > 0) out.contextSize = maxLen;
  } catch (err) {
    out.error = err instanceof ReexError ? err : new ReexError("POLICY_ERROR", errorText(err));
    return out;
  }
  try {
    const props = await endpoint.json(`${endpoint.root}/props`, undefined, { method: "GET", accept: [400, 404, 405, 501], timeoutMs });
    if (props.status < 300 && isRecord(props.json)) {
      const json = props.json;
      const settings = json.default_generation_settings;
      const nCtx = isRecord(settings) ? finite(settings.n_ctx) : finite(json.n_ctx);
      if (out.contextSize === undefined && nCtx !== undefined && nCtx > 0) out.contextSize = nCtx;
      const path = text(json.model_path);
      const template = text(json.chat_template);
      const bos = text(json.bos_token);
      if (path) out.modelPath = path;
      if (template) out.chatTemplate = template;
      if (bos) out.bosToken = bos;
    }
  } catch {
    // /props is llama-server's; its absence says nothing
  }
  return out;
}

function leaf(path: string): string {
  return path.split(/[\\/]/).filter(Boolean).at(-1) ?? path;
}

/**
 * The deployment's self-description for profile detection: `file` is the served model file's name
 * (llama-server's `model_path`) or else the served model id; `name` is the served id when it is an
 * alias of that file (llama-server `--alias`); `chatTemplate` is the template the server reports.
 */
export function remoteMetadata(servedModel: string, facts: EndpointFacts): ModelMetadata {
  const meta: ModelMetadata = {};
  const file = facts.modelPath ? leaf(facts.modelPath) : servedModel;
  if (file) meta.file = file;
  if (facts.modelPath && servedModel !== facts.modelPath && leaf(servedModel) !== file) meta.name = servedModel;
  if (facts.chatTemplate) meta.chatTemplate = facts.chatTemplate;
  return meta;
}

/**
 * The server's own chat template as a `{system}`/`{user}` template, read by rendering two sentinel
 * messages through llama-server's `POST /apply-template`; undefined when the server has no such
 * route or its rendering does not keep both messages verbatim.
 */
export async function serverTemplate(endpoint: Endpoint, bosToken: string | undefined): Promise<string | undefined> {
  const messages = [
    { role: "system", content: SYSTEM_SENTINEL },
    { role: "user", content: USER_SENTINEL },
  ];
  try {
    const reply = await endpoint.json(
      `${endpoint.root}/apply-template`,
      { messages },
      {
        accept: [400, 404, 405, 500, 501],
        timeoutMs: Math.min(endpoint.timeoutMs, PROBE_TIMEOUT_MS),
      },
    );
    const rendered = reply.status < 300 && isRecord(reply.json) ? text(reply.json.prompt) : undefined;
    return rendered === undefined ? undefined : templateFromRendered(rendered, bosToken);
  } catch {
    return undefined;
  }
}
