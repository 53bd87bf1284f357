// The MCP server as a bundle of its own, for `ocx2 --mcp` (src/adapters/cli/McpFlag.ts): the CLI's own
// bundle then holds no MCP SDK.
export { runMcpServer } from "../src/adapters/Mcp.js"
