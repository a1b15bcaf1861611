/** The text side of the SQL layer: the lexer every reader and rewriter of SQL text goes through, and the scope walker over its tokens. */
export { lexSql, type SqlToken } from "./lexer.js";
export { sqlScopes, type SqlScopes } from "./scopes.js";
export {
  AGGREGATES,
  COMPOUND_WORDS,
  FROM_ENDS,
  JOIN_WORDS,
  KEYWORD_LIKE,
  SQL_FUNCTIONS,
  SQL_TYPE_NAMES,
  SQLITE_KEYWORDS,
  UNARY_FUNCTIONS,
} from "./vocabulary.js";
