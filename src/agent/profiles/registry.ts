/**
 * The profile registry and model detection: a profile is chosen by name (request, config) or read
 * off the model's GGUF metadata (`general.name`, `general.basename`, `general.finetune`, the file
 * name, the chat template); anything unrecognised gets `generic`.
 */
import { ReexError } from "../../errors/index.js";
import { PROFILE_IDS, type ProfileId } from "../../config/index.js";
import type { ModelMetadata } from "../../policy/index.js";
import type { PromptFamily } from "../types.js";
import { genericProfile } from "./generic.js";
import { omnisqlProfile } from "./omnisql.js";
import { reexProfile } from "./reex.js";
import { skyrlSqlProfile } from "./skyrl-sql.js";
import { thinkAnswerProfile } from "./think-answer.js";
import type { ModelProfile } from "./types.js";

const BY_ID: Record<ProfileId, ModelProfile> = {
  reex: reexProfile,
  "skyrl-sql": skyrlSqlProfile,
  omnisql: omnisqlProfile,
  "think-answer": thinkAnswerProfile,
  generic: genericProfile,
};

/** Every built-in profile, in `PROFILE_IDS` order (the order docs list them). */
export const PROFILES: readonly ModelProfile[] = PROFILE_IDS.map((id) => BY_ID[id]);

export { PROFILE_IDS };

/** Every tag any built-in profile uses (from the profiles' syntaxes); feedback text is defused against all of them. */
export const KNOWN_TAGS: readonly string[] = [...new Set(PROFILES.flatMap((p) => Object.keys(p.syntax.tags)))];

/** The profile with this id; BAD_REQUEST naming the known ones otherwise. */
export function getProfile(id: string): ModelProfile {
  const found = PROFILES.find((p) => p.id === id);
  if (!found) {
    throw new ReexError("BAD_REQUEST", `unknown profile "${id}" (known: ${PROFILE_IDS.join(", ")})`, {
      issues: [{ path: ["profile"], message: `must be one of ${PROFILE_IDS.join(", ")}` }],
    });
  }
  return found;
}

/** What detection reads of a model: its GGUF metadata or served name (the policy's `info.metadata`). */
export type { ModelMetadata };

/** A chosen profile and why it was chosen (shown by /readyz, `reex ask` and the playground). */
export interface ProfileChoice {
  profile: ModelProfile;
  reason: string;
}

/** Name patterns, most specific first: the first that matches a metadata field picks the profile. */
const NAME_RULES: readonly { pattern: RegExp; id: ProfileId; label: string }[] = [
  { pattern: /skyrl/, id: "skyrl-sql", label: "SkyRL-SQL" },
  { pattern: /arctic-?text2sql|sql-?r1|think2sql|cognisql/, id: "think-answer", label: "a think/answer SQL model (Arctic-R1, SQL-R1, Think2SQL)" },
  // measured (docs/benchmarks.md, "The default model"): at 0.5B the ReEx tags beat the native ```sql prompt
  { pattern: /qwen-?2\.5-coder-0\.5b/, id: "generic", label: "Qwen2.5-Coder-0.5B, which answers more in the ReEx protocol than in its native prompt" },
  { pattern: /omnisql|xiyan|qwen2\.5-coder|qwen-2\.5-coder/, id: "omnisql", label: "OmniSQL, XiYan or Qwen2.5-Coder" },
  { pattern: /^reex|[-/]reex/, id: "reex", label: "a reex model" },
];

const FIELDS: readonly ("name" | "basename" | "finetune" | "file")[] = ["name", "basename", "finetune", "file"];

const FIELD_LABEL: Readonly<Record<keyof ModelMetadata, string>> = {
  name: "general.name",
  basename: "general.basename",
  finetune: "general.finetune",
  file: "the model's file name",
  chatTemplate: "the chat template",
  adapters: "the LoRA adapter",
};

function normalise(value: string): string {
  return value.toLowerCase().replace(/[\s_]+/g, "-");
}

/** Picks a profile from a model's metadata; `generic` (with the fields it read) when no rule matches. */
export function detectProfile(meta: ModelMetadata): ProfileChoice {
  for (const rule of NAME_RULES) {
    for (const field of FIELDS) {
      const value = meta[field];
      if (value && rule.pattern.test(normalise(value))) {
        return { profile: getProfile(rule.id), reason: `${FIELD_LABEL[field]} "${value}" names ${rule.label}` };
      }
    }
    const adapter = meta.adapters?.find((a) => rule.pattern.test(normalise(a)));
    if (adapter) return { profile: getProfile(rule.id), reason: `${FIELD_LABEL.adapters} "${adapter}" names ${rule.label}` };
  }
  const template = meta.chatTemplate ?? "";
  if (/<solution>/.test(template) && /<sql>/.test(template)) return { profile: skyrlSqlProfile, reason: "the chat template uses <sql> and <solution>" };
  const seen = FIELDS.filter((f) => meta[f]).map((f) => `${FIELD_LABEL[f]} "${meta[f]}"`);
  return {
    profile: genericProfile,
    reason: seen.length ? `no known text-to-SQL model in ${seen.join(", ")}: generic` : "the model names itself nowhere: generic",
  };
}

/** `general.name` prefix of the project's own starter models (src/starter names them `reex-starter-seed<N>`). */
export const STARTER_NAME_PREFIX = "reex-starter";

/** Whether a model is one of the project's starter models, by its `general.name`. */
export function isStarterModel(meta: ModelMetadata): boolean {
  return meta.name?.toLowerCase().startsWith(STARTER_NAME_PREFIX) ?? false;
}

/**
 * The profile to use: an explicit id (request or config; "auto" means none) wins, else detection
 * from the model's metadata. Default detection.
 */
export function resolveProfile(explicit: string | undefined, meta: ModelMetadata, source = "policy.profile"): ProfileChoice {
  if (explicit !== undefined && explicit !== "auto") return { profile: getProfile(explicit), reason: `set by ${source}` };
  return detectProfile(meta);
}

/** The family to use with a profile: the requested one if the profile supports it (BAD_REQUEST otherwise), else the profile's default. */
export function familyFor(profile: ModelProfile, requested: PromptFamily | undefined): PromptFamily {
  if (requested === undefined) return profile.families[0]!;
  if (!profile.families.includes(requested)) {
    throw new ReexError("BAD_REQUEST", `profile "${profile.id}" does not support the ${requested} prompt family (it supports ${profile.families.join(", ")})`, {
      issues: [{ path: ["promptFamily"], message: `must be one of ${profile.families.join(", ")} for profile ${profile.id}` }],
    });
  }
  return requested;
}
