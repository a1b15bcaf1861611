/**
 * Resolving a model URI (`hf:owner/repo/file.gguf`, `https://…/file.gguf`) into the models folder:
 * a file already there is used as it is, without the network; otherwise the host is asked first,
 * with a connect timeout, so that a machine without a network fails at once with MODEL_NOT_FOUND
 * instead of waiting through node-llama-cpp's downloader (ipull retries a refused or silent host
 * 150 times, about 12 minutes, saying nothing). The download then reports progress lines and fails
 * the same way when no byte arrives for the timeout.
 */
import { resolveModelFile } from "node-llama-cpp";
import { ReexError } from "../errors/index.js";

/** How to resolve one model URI. */
export interface ModelDownloadOptions {
  /** The models folder: looked in first, downloaded into. */
  directory: string;
  /** Download when the file is not in `directory`; false makes that MODEL_NOT_FOUND. Default true. */
  download?: boolean;
  /** Longest wait for the host to answer, and for the next bytes once the download runs, ms. */
  timeoutMs: number;
  /** Progress in words: where it downloads from, how far it is (every 10% or 10 s), that it finished. Default none. */
  log?: (line: string) => void;
  /** Progress in bytes. Default none. */
  onProgress?: (progress: { downloadedBytes: number; totalBytes: number }) => void;
  /** Where `hf:` URIs are resolved. Default: $MODEL_ENDPOINT, else $HF_ENDPOINT, else https://huggingface.co/ (as node-llama-cpp does). */
  huggingFaceEndpoint?: string;
}

/** The Hugging Face endpoint node-llama-cpp uses for `hf:` URIs, given `explicit` or the environment. */
function huggingFaceEndpoint(explicit: string | undefined): string {
  const pick = explicit ?? process.env.MODEL_ENDPOINT ?? process.env.HF_ENDPOINT ?? "https://huggingface.co/";
  return pick.endsWith("/") ? pick : `${pick}/`;
}

/** The origin a URI downloads from: the endpoint's for `hf:`/`huggingface:`, the URL's own for `http(s)://`. */
function hostOf(uri: string, endpoint: string): string {
  try {
    return new URL(/^https?:\/\//i.test(uri) ? uri : endpoint).origin;
  } catch {
    return endpoint;
  }
}

function errorText(err: unknown): string {
  const e = err as { message?: unknown; cause?: { code?: unknown; message?: unknown } };
  const message = typeof e?.message === "string" ? e.message : String(err);
  const cause = e?.cause && typeof e.cause.code === "string" ? ` (${e.cause.code})` : "";
  return message + cause;
}

/** Asks `origin` for anything at all within `timeoutMs`; any HTTP answer will do. Throws MODEL_NOT_FOUND when none comes. */
async function checkReachable(uri: string, origin: string, directory: string, timeoutMs: number): Promise<void> {
  const advice = `download the file yourself into ${directory} and set policy.model to its path, or point HF_ENDPOINT at a mirror you can reach`;
  try {
    const res = await fetch(origin, { method: "HEAD", redirect: "manual", signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
  } catch (err) {
    const timedOut = (err as Error)?.name === "TimeoutError" || (err as Error)?.name === "AbortError";
    const why = timedOut ? `no answer within ${timeoutMs} ms (policy.downloadTimeoutMs)` : `it could not be reached: ${errorText(err)}`;
    throw new ReexError("MODEL_NOT_FOUND", `model ${uri} is not in ${directory} and ${origin} was asked for it, but ${why}; no network? ${advice}`, {
      cause: err,
    });
  }
}

/** Logs progress at most every 10% or every 10 s. */
function progressLogger(uri: string, log: ((line: string) => void) | undefined): (downloaded: number, total: number) => void {
  let lastAt = 0;
  let lastTenth = -1;
  const mb = (n: number): string => `${(n / 1e6).toFixed(n < 1e8 ? 1 : 0)} MB`;
  return (downloaded, total) => {
    if (!log) return;
    const tenth = total > 0 ? Math.floor((downloaded / total) * 10) : -1;
    const now = Date.now();
    if (tenth === lastTenth && now - lastAt < 10_000) return;
    lastAt = now;
    lastTenth = tenth;
    log(
      total > 0
        ? `downloading ${uri}: ${Math.floor((downloaded / total) * 100)}% (${mb(downloaded)} of ${mb(total)})`
        : `downloading ${uri}: ${mb(downloaded)}`,
    );
  };
}

/**
 * The local path of model `uri`: the file already in `directory`, else downloaded there. Throws
 * MODEL_NOT_FOUND when it is missing and `download` is false, when the host does not answer within
 * `timeoutMs`, when the download stalls that long, or when the host has no such file.
 */
export async function resolveModelUri(uri: string, options: ModelDownloadOptions): Promise<string> {
  const { directory, timeoutMs } = options;
  const endpoint = huggingFaceEndpoint(options.huggingFaceEndpoint);
  const common = { directory, cli: false, endpoints: { huggingFace: endpoint } } as const;
  try {
    return await resolveModelFile(uri, { ...common, download: false });
  } catch (err) {
    if (options.download === false)
      throw new ReexError("MODEL_NOT_FOUND", `model ${uri} is not in ${directory} and downloading is off: ${errorText(err)}`, { cause: err });
  }
  const origin = hostOf(uri, endpoint);
  options.log?.(`downloading ${uri} from ${origin} into ${directory}`);
  await checkReachable(uri, origin, directory, timeoutMs);
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let stalled: ReexError | undefined;
  let rejectStall: (err: ReexError) => void = () => undefined;
  const stall = new Promise<never>((_, reject) => {
    rejectStall = reject;
  });
  stall.catch(() => undefined);
  const armStall = (): void => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      stalled = new ReexError(
        "MODEL_NOT_FOUND",
        `the download of ${uri} from ${origin} got no bytes for ${timeoutMs} ms (policy.downloadTimeoutMs); it was stopped`,
      );
      controller.abort(stalled);
      rejectStall(stalled);
    }, timeoutMs);
  };
  armStall();
  const report = progressLogger(uri, options.log);
  try {
    const path = await Promise.race([
      resolveModelFile(uri, {
        ...common,
        download: "auto",
        signal: controller.signal,
        onProgress: ({ totalSize, downloadedSize }) => {
          armStall();
          report(downloadedSize, totalSize);
          options.onProgress?.({ downloadedBytes: downloadedSize, totalBytes: totalSize });
        },
      }),
      stall,
    ]);
    options.log?.(`downloaded ${uri} to ${path}`);
    return path;
  } catch (err) {
    if (stalled) throw stalled;
    throw new ReexError("MODEL_NOT_FOUND", `model ${uri} could not be downloaded from ${origin} into ${directory}: ${errorText(err)}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}
