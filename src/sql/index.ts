/** The SQL layer: registry, guard, executor pool, schema prompt, matched values, EX comparison, entities, the SQL lexer. */
export * from "./types.js";
export * from "./surface-exec.js";
export * from "./surface-prompt.js";
export * from "./surface-text.js";
