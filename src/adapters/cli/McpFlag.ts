// `ocx2 --mcp`, so a program's own configuration can start the tools as `ocx2 --mcp` where
// ocx2-mcp is not installed. Loaded only when --mcp is given, from the MCP server's bundle beside
// the program (ocx2-mcp-server): the MCP SDK is large, and the CLI's own start-up stays fast.

import { mcpServer } from "../../Bundles.js"

export interface McpFlag {
  /** --repository: the repository the calls act on and whose capabilities bind the caller; OCX_REPOSITORY when not given */
  readonly repository: string | undefined
  /** --user: the user to act as; OCX_USER when not given, else the clone's remembered user */
  readonly user: string | undefined
}

/** Serves MCP on stdin/stdout until the client closes it, exactly as ocx2-mcp does. */
export const serveMcpFromCli = async (flag: McpFlag): Promise<void> =>
  (await mcpServer.load()).runMcpServer({ repository: flag.repository, user: flag.user })
