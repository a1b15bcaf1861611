/**
 * GBNF helpers: quoting text as a grammar literal, and a cache of compiled grammars keyed by their
 * text (compiling parses the grammar in llama.cpp; tree decoding reuses one grammar many times).
 */
import type { Llama, LlamaGrammar } from "node-llama-cpp";
import { ReexError } from "../errors/index.js";

/** `text` as a GBNF string literal (quotes, backslashes and control characters escaped). */
export function gbnfLiteral(text: string): string {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === '"' || ch === "\\") out += "\\" + ch;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (code < 0x20 || code === 0x7f) out += "\\x" + code.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + '"';
}

/** A grammar whose only sentence is `text`: handy to force an exact output in tests and demos. */
export function exactTextGrammar(text: string): string {
  return `root ::= ${gbnfLiteral(text)}\n`;
}

/** Compiled grammars by text, least recently used dropped past `capacity` (default 64). */
export class GrammarCache {
  private readonly grammars = new Map<string, Promise<LlamaGrammar>>();

  constructor(private readonly capacity = 64) {}

  /** The compiled grammar for `text`; BAD_REQUEST when llama.cpp cannot parse it. */
  get(llama: Llama, text: string): Promise<LlamaGrammar> {
    let grammar = this.grammars.get(text);
    if (grammar) {
      this.grammars.delete(text);
      this.grammars.set(text, grammar);
      return grammar;
    }
    grammar = llama.createGrammar({ grammar: text }).catch((err: unknown) => {
      this.grammars.delete(text);
      throw new ReexError("BAD_REQUEST", `invalid GBNF grammar: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
    this.grammars.set(text, grammar);
    while (this.grammars.size > this.capacity) {
      const oldest = this.grammars.keys().next().value as string;
      this.grammars.delete(oldest);
    }
    return grammar;
  }

  clear(): void {
    this.grammars.clear();
  }
}
