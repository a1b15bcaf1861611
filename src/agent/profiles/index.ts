/** Model profiles: the prompts and response protocols of released text-to-SQL models, one module each. */
export type { FeedbackStyle, ModelProfile, ProfileId, ProfilePromptInput, Wrapper } from "./types.js";
export {
  detectProfile,
  familyFor,
  getProfile,
  isStarterModel,
  KNOWN_TAGS,
  PROFILE_IDS,
  PROFILES,
  resolveProfile,
  STARTER_NAME_PREFIX,
  type ModelMetadata,
  type ProfileChoice,
} from "./registry.js";
export { fencedFormatCheck } from "./common.js";
export { reexProfile } from "./reex.js";
export { genericProfile } from "./generic.js";
export { skyrlSqlProfile } from "./skyrl-sql.js";
export { omnisqlProfile } from "./omnisql.js";
export { thinkAnswerProfile } from "./think-answer.js";
