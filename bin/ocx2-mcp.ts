import { runMcpServer } from "../src/adapters/Mcp.js"

// MCP over stdio for a program, as its caller (OCX_USER, OCX_CAPABILITIES, OCX_REPOSITORY).
// stdout belongs to the protocol: a failure is told on stderr only.
runMcpServer({ repository: process.env.OCX_REPOSITORY || undefined }).then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`ocx2-mcp: ${String(error?.message ?? error)}\n`)
    process.exit(1)
  }
)
