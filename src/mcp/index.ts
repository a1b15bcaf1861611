/** reex as an MCP server: the tools, the schema resources, and what a transport needs to serve them. */
export { createMcpServer, schemaUri } from "./server.js";
export { TOOL_NAMES, toolSchemas } from "./tools.js";
export { TRACE_LINES, type McpAnswer, type McpCell, type McpRows } from "./format.js";
export type { McpDecode, McpDeps, McpLog, McpRegistry } from "./types.js";
