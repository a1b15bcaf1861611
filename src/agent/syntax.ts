/**
 * A response protocol's tags and what each one means. The parser, the rollout, the grammar and the
 * format check read a response through one of these, so a model trained on `<sql>`/`<observation>`/
 * `<solution>` is read as exactly as one trained on the ReEx tags.
 */

/** What a tag means: reasoning, a probe the server runs, the server's feedback, the answer; aliases are read but break the strict format. */
export type TagRole = "think" | "probe" | "feedback" | "final" | "think-alias" | "final-alias";

/** Tag names (without brackets, lower case) and their roles. */
export interface ResponseSyntax {
  readonly tags: Readonly<Record<string, TagRole>>;
}

/** The ReEx tags, plus `<reasoning>` and `<answer>` (used by other papers' models) read as aliases. */
export const REEX_SYNTAX: ResponseSyntax = {
  tags: { think: "think", intermediate_sql: "probe", result: "feedback", final_sql: "final", reasoning: "think-alias", answer: "final-alias" },
};

/** The first tag with a role, or undefined. */
export function tagWith(syntax: ResponseSyntax, role: TagRole): string | undefined {
  for (const [name, r] of Object.entries(syntax.tags)) if (r === role) return name;
  return undefined;
}

/** `<name>`. */
export function openTag(name: string): string {
  return `<${name}>`;
}

/** `</name>`. */
export function closeTag(name: string): string {
  return `</${name}>`;
}
