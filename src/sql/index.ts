/** The SQL layer: registry, guard, executor pool, schema prompt, matched values, EX comparison, entities. */
export * from "./types.js";
export * from "./surface-exec.js";
export * from "./surface-prompt.js";
