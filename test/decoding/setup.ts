/** A decoder over the scripted policy and the in-memory executor, for the exact-logic tests. */
import { createDecoder } from "../../src/decoding/index.js";
import { type Decoder, type DecoderDeps } from "../../src/decoding/testing.js";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { type Script, type ScriptedPolicyOptions } from "../../src/policy/testing.js";
import type { ExecResult } from "../../src/sql/types.js";
import { FakeExecutor, FIXED_PROMPT } from "./helpers.js";

/** The pieces of a scripted decode. */
export interface Scripted {
  policy: ScriptedPolicy;
  executor: FakeExecutor;
  decode: Decoder;
  /** Most live trajectories seen by any generate call. */
  peakLive(): number;
}

/** A decoder whose model follows `script` and whose database answers from `answers`. */
export function scripted(
  script: Script,
  answers: Record<string, ExecResult>,
  options: { policy?: ScriptedPolicyOptions; execDelayMs?: number; deps?: Partial<DecoderDeps> } = {},
): Scripted {
  let peak = 0;
  let policy!: ScriptedPolicy;
  const wrapped: Script =
    typeof script === "function"
      ? (ctx) => {
          peak = Math.max(peak, policy.liveTrajectories());
          return script(ctx);
        }
      : script;
  policy = new ScriptedPolicy(wrapped, options.policy);
  const executor = new FakeExecutor(answers, options.execDelayMs);
  const decode = createDecoder({ policy, executor, promptFor: () => FIXED_PROMPT, ...options.deps });
  return { policy, executor, decode, peakLive: () => peak };
}
