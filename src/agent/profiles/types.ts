/**
 * A model profile: everything that differs between the protocols released text-to-SQL models were
 * trained on (prompt, tags, stops, parser, grammar skeleton, format check). The rollout, the
 * decoder, the trainer and every front end take one of these instead of branching on model names.
 */
import type { SchemaFormat } from "../../sql/index.js";
import type { FormatVerdict } from "../parse.js";
import type { BuiltPrompt, PromptExtras } from "../prompts.js";
import type { ResponseSyntax } from "../syntax.js";
import type { ProfileId } from "../../config/index.js";
import type { PromptFamily } from "../types.js";

/** The built-in profiles (the list: src/config's `PROFILE_IDS`). */
export type { ProfileId } from "../../config/index.js";

/** An opening and a closing marker written around a segment (`<sql>` … `</sql>`, "```sql\n" … "\n```"). */
export interface Wrapper {
  open: string;
  close: string;
}

/**
 * What a profile's prompt is built from; `schema` is already serialised in the profile's
 * `schemaFormat`. The extras (verified examples, earlier turns) go after the schema, outside the
 * cached prefix, in the profile's own layout.
 */
export interface ProfilePromptInput extends PromptExtras {
  family: PromptFamily;
  schema: string;
  /** Values of the database that match words of the question, serialised; omitted when empty. */
  matchedValues?: string;
  question: string;
  /** The hint ("evidence", "external knowledge"); omitted when empty. */
  evidence?: string;
  /** The database engine the prompt names ("PostgreSQL" for a Postgres source). Default "SQLite". */
  dialect?: string;
}

/** How a profile shows a probe's result: reex's `a | b` lines, or a dataframe-like table (SkyRL-SQL). */
export type FeedbackStyle = "lines" | "dataframe";

/** One protocol: how to prompt a model, what it writes, and how the server answers it. */
export interface ModelProfile {
  readonly id: ProfileId;
  /** One line for tables and /readyz. */
  readonly title: string;
  /** The released models this profile serves. */
  readonly models: readonly string[];
  /** Where the authors published the prompt this profile follows (`owner/repo:path`). */
  readonly sources: readonly string[];
  /** Prompt families the protocol supports; the first is the profile's default. */
  readonly families: readonly PromptFamily[];
  /** Schema serialisation the model was trained on. */
  readonly schemaFormat: SchemaFormat;
  /** The tags a response is read with. */
  readonly syntax: ResponseSyntax;
  /** The reasoning wrapper, when the protocol tags reasoning. */
  readonly think?: Wrapper;
  /** The probe wrapper; absent for single-turn protocols (no probes are run). */
  readonly probe?: Wrapper;
  /** The wrapper of injected feedback; absent for single-turn protocols. */
  readonly feedback?: Wrapper;
  /** The final answer's wrapper; the server writes `answer.open` itself when it forces an answer. */
  readonly answer: Wrapper;
  /** How probe results are rendered inside the feedback wrapper. */
  readonly feedbackStyle: FeedbackStyle;
  /** Rows a dataframe-style observation shows at most (SkyRL-SQL truncates at 50). Default: the request's feedback rows. */
  readonly feedbackRowCap?: number;
  /** Whether the model may declare a question unanswerable (`UNANSWERABLE: reason`); only the ReEx-tag profiles are told so. */
  readonly unanswerable: boolean;
  /**
   * False where the profile's models were trained without verified examples in the prompt and answer
   * worse with them: the prompt builder then shows none (docs/teaching.md). Default true.
   */
  readonly examples?: boolean;
  /** The chat messages of a question, with the part that depends only on the database marked for prefix caching. */
  buildPrompt(input: ProfilePromptInput): BuiltPrompt;
  /** The reward's strict format check for a whole response (injected feedback included). */
  formatCheck(text: string, family: PromptFamily): FormatVerdict;
}
