import * as LiveHosts from "../layers/LiveHosts.js"
import { demo, isInteractive } from "../src/demo/Demo.js"

demo({ wait: isInteractive() && !process.argv.includes("--no-wait") }, LiveHosts.hosts).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`demo failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    process.exit(1)
  }
)
