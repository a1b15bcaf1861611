/**
 * What sampling outside a run needs, set up as `reex train grpo` sets it up: the policy (with `learner.lora.in`), the
 * executor, the prompt builder, the run's group sampler and reward, and the held-out decoder. Shared by the pre-flight
 * and rejection sampling.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { familyFor, resolveProfile, type ModelProfile } from "../agent/index.js";
import { createPromptBuilder, type PromptFamily, type PromptFor } from "../decoding/index.js";
import type { Policy } from "../policy/index.js";
import { ExecutorPool, type Executor } from "../sql/index.js";
import type { TrainConfig } from "./config.js";
import { defaultPolicy, groupSampler, heldoutDecoder, rewardSpecOf, type GroupSampler } from "./loop.js";
import { GoldCache, type ResolvedRewardSpec, type RewardEnv } from "./rewards.js";

/** How {@link openSampling} loads its parts; every field has a default. */
export interface SamplingOptions {
  /** Loads the policy. Default the config's `policy` section (with `learner.lora.in` on the model), as `reex train` loads it. */
  createPolicy?: (model: string, config: TrainConfig, lora: string[]) => Promise<Policy>;
  /** Default an ExecutorPool with the config's `executor` section (closed by `close`). */
  executor?: Executor;
  signal?: AbortSignal;
}

/** An open sampling session; `close` releases what it opened. */
export interface SamplingSession {
  policy: Policy;
  sample: GroupSampler;
  decoder: ReturnType<typeof heldoutDecoder>;
  promptFor: PromptFor;
  profile: ModelProfile;
  family: PromptFamily;
  reward: ResolvedRewardSpec;
  rewardEnv: RewardEnv;
  close(): Promise<void>;
}

/**
 * Opens a sampling session for `config`; `before` runs once the executor and gold cache exist and before the model loads
 * (a gold check, so a bad file fails first). Whatever was opened is closed again when it throws.
 */
export async function openSampling(
  config: TrainConfig,
  options: SamplingOptions,
  before?: (executor: Executor, goldCache: GoldCache) => Promise<void>,
): Promise<SamplingSession> {
  const executor =
    options.executor ?? new ExecutorPool({ workers: config.executor.workers, timeoutMs: config.executor.timeoutMs, maxRows: config.executor.maxRows });
  const goldCache = new GoldCache();
  const rewardEnv = { executor, goldCache, timeoutMs: config.reward.timeoutMs };
  const reward = rewardSpecOf(config);
  const indexDir = await mkdtemp(join(tmpdir(), "reex-sampling-"));
  const prompts = createPromptBuilder({ indexDir });
  let policy: Policy | undefined;
  let decoder: ReturnType<typeof heldoutDecoder> | undefined;
  const close = async (): Promise<void> => {
    decoder?.close();
    prompts.close();
    await policy?.close().catch(() => undefined);
    if (!options.executor) await executor.close();
    await rm(indexDir, { recursive: true, force: true });
  };
  try {
    await before?.(executor, goldCache);
    const lora = config.learner.lora?.in;
    policy = await (options.createPolicy ?? defaultPolicy)(config.model, config, lora ? [lora] : []);
    const profile = resolveProfile(config.profile, policy.info.metadata ?? {}, "the training config's profile").profile;
    const family = familyFor(profile, config.promptFamily);
    const sample = groupSampler(config, {
      policy,
      executor,
      promptFor: prompts.promptFor,
      profile,
      family,
      reward,
      rewardEnv,
      signal: options.signal,
      indexDir,
    });
    decoder = heldoutDecoder(config, { policy, executor, indexDir, profile: profile.id, family });
    return { policy, sample, decoder, promptFor: prompts.promptFor, profile, family, reward, rewardEnv, close };
  } catch (err) {
    await close();
    throw err;
  }
}
