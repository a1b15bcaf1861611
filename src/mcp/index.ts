/** reex as an MCP server: the tools, the schema resources, and what a transport needs to serve them. */
export { createMcpServer } from "./server.js";
export type { McpDecode } from "./types.js";
