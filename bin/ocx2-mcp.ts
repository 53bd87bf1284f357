import { runMcpServer } from "../src/adapters/Mcp.js"

// MCP over stdio for a program, as its user (OCX_USER, or the clone's remembered user) within the
// capabilities the repository (OCX_REPOSITORY) gives that user.
// stdout belongs to the protocol: a failure is told on stderr only.
runMcpServer({ repository: process.env.OCX_REPOSITORY || undefined }).then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`ocx2-mcp: ${String(error?.message ?? error)}\n`)
    process.exit(1)
  }
)
