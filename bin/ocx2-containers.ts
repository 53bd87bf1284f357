// The tool-container server (docs/containers.md): `ocx2-containers serve` listens for clients,
// `ocx2-containers token IDENTITY` mints a client's token. Exit status: 0 done, 1 failed, 2 bad usage.
import { containersHostLayer } from "../layers/ContainersHost.js"
import { runContainersServer } from "../src/containers/ServerProgram.js"

runContainersServer(process.argv.slice(2), containersHostLayer).then(
  (code) => {
    if (code !== undefined) process.exit(code)
  },
  (e: unknown) => {
    process.stderr.write(`ocx2-containers: ${e instanceof Error ? e.message : String(e)}\n`)
    process.exit(1)
  }
)
