/**
 * What the grammar and name binding share: a database's names, the segments a grammar covers and a
 * protocol's tag skeleton. Below both, so binding.ts reads them without importing grammar.ts (which
 * names binding's type in its segment grammars).
 */

/** The identifiers of a database: its tables and each table's columns. */
export interface SchemaNames {
  tables: { name: string; columns: string[] }[];
}

/** Which generate segment a grammar covers (see the module doc). */
export type GrammarStart = "first" | "segment" | "final-body" | "final-from" | "probe-from";

/** A protocol's tag skeleton: the markers around reasoning, probes and the answer (a model profile is one). */
export interface GrammarSkeleton {
  think?: { open: string; close: string };
  probe?: { open: string; close: string };
  answer: { open: string; close: string };
  /** Whether the answer may be `UNANSWERABLE: reason`. Default true. */
  unanswerable?: boolean;
}

/** The ReEx tags: `<think>`, `<intermediate_sql>`, `<final_sql>`. */
export const REEX_SKELETON: GrammarSkeleton = {
  think: { open: "<think>", close: "</think>" },
  probe: { open: "<intermediate_sql>", close: "</intermediate_sql>" },
  answer: { open: "<final_sql>", close: "</final_sql>" },
};
