/** The text side of the SQL layer: the lexer every reader and rewriter of SQL text goes through. */
export { lexSql, type SqlToken } from "./lexer.js";
