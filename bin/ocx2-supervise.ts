import { runSuperviseCommand } from "../src/adapters/cli/SuperviseCommand.js"

// ocx2-supervise --node USER [--root ROOT] [--repository REPO]: `ocx2 supervise` as a program of its
// own, for the service (docs/systemd/ocx2-supervise@.service). It loads the round's bundle and nothing
// of the command line's, so the resident process holds only the code it runs.
runSuperviseCommand(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`ocx2-supervise: ${e instanceof Error ? e.message : String(e)}\n`)
    process.exit(1)
  }
)
