/**
 * How the remote policy renders a chat as prompt text: ChatML, a configured `{system}`/`{user}`
 * template, or the serving engine's own template (llama-server's `POST /apply-template`) turned
 * into one.
 */
import { ReexError } from "../../errors/index.js";
import { mergeParts } from "../prompt.js";
import type { ChatMessage, PromptPart } from "../types.js";

const CHATML_START = "<|im_start|>";
const CHATML_END = "<|im_end|>";

/** The parts of a chat rendered through a `{system}`/`{user}` template. */
export function renderTemplate(template: string, messages: ChatMessage[]): PromptPart[] {
  const last = messages.at(-1);
  const continued = last?.role === "assistant" ? last : undefined;
  const body = continued ? messages.slice(0, -1) : messages;
  const users = body.filter((m) => m.role === "user");
  if (users.length !== 1 || body.some((m) => m.role === "assistant")) {
    throw new ReexError(
      "POLICY_ERROR",
      "the remote policy's chat template renders one system and one user message (and a final assistant message to continue); use the default ChatML rendering for other conversations",
    );
  }
  const system = body
    .filter((m) => m.role === "system")
    .map((m) => m.content)
    .join("\n\n");
  const parts: PromptPart[] = [];
  for (const piece of template.split(/(\{system\}|\{user\})/)) {
    if (piece === "{system}") parts.push({ text: system, special: false });
    else if (piece === "{user}") parts.push({ text: users[0]!.content, special: false });
    else parts.push({ text: piece, special: true });
  }
  if (continued) parts.push({ text: continued.content, special: false });
  return mergeParts(parts);
}

/** The parts of a chat rendered as ChatML, ending with the assistant turn opened (or a final assistant message continued). */
export function renderChatML(messages: ChatMessage[]): PromptPart[] {
  const parts: PromptPart[] = [];
  messages.forEach((m, i) => {
    parts.push({ text: `${CHATML_START}${m.role}\n`, special: true }, { text: m.content, special: false });
    if (i < messages.length - 1 || m.role !== "assistant") parts.push({ text: `${CHATML_END}\n`, special: true });
  });
  if (messages.at(-1)?.role !== "assistant") parts.push({ text: `${CHATML_START}assistant\n`, special: true });
  return mergeParts(parts);
}

/** System message content that marks where a server's template puts the system message. */
export const SYSTEM_SENTINEL = "REEXSYSTEMSENTINEL8C1F";
/** User message content that marks where a server's template puts the user message. */
export const USER_SENTINEL = "REEXUSERSENTINEL8C1F";

/**
 * A `{system}`/`{user}` template from a chat rendered with the sentinels as its messages; a leading
 * BOS spelling is dropped (the server adds BOS when it tokenises). Undefined unless each sentinel
 * appears exactly once and the text has no placeholder of its own.
 */
export function templateFromRendered(rendered: string, bosToken?: string): string | undefined {
  const once = (s: string): boolean => rendered.indexOf(s) >= 0 && rendered.indexOf(s) === rendered.lastIndexOf(s);
  if (!once(SYSTEM_SENTINEL) || !once(USER_SENTINEL) || /\{system\}|\{user\}/.test(rendered)) return undefined;
  let template = rendered.replace(SYSTEM_SENTINEL, "{system}").replace(USER_SENTINEL, "{user}");
  if (bosToken && template.startsWith(bosToken)) template = template.slice(bosToken.length);
  return template;
}
