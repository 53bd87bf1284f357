// `ocx2 --mcp`, so a program's own configuration can start the tools as `ocx2 --mcp` where
// ocx2-mcp is not installed. Loaded only when --mcp is given, from the MCP server's bundle beside
// the program (ocx2-mcp-server): the MCP SDK is large, and the CLI's own start-up stays fast.

import { loadSibling } from "../../Siblings.js"

export interface McpFlag {
  /** --repository: the repository the calls act on and whose capabilities bind the caller; OCX_REPOSITORY when not given */
  readonly repository: string | undefined
  /** --user: the user to act as; OCX_USER when not given, else the clone's remembered user */
  readonly user: string | undefined
}

type McpModule = typeof import("../Mcp.js")

const loadMcp = (): Promise<McpModule> => {
  const fromSource = "../adapters/Mcp.js" // not followed by the bundler
  return loadSibling("ocx2-mcp-server", typeof OCX2_BUNDLED === "undefined" ? () => import(fromSource) : undefined)
}

/** Serves MCP on stdin/stdout until the client closes it, exactly as ocx2-mcp does. */
export const serveMcpFromCli = async (flag: McpFlag): Promise<void> =>
  (await loadMcp()).runMcpServer({ repository: flag.repository, user: flag.user })
