import * as Effect from "effect/Effect"
import * as ReleaseRootFs from "../layers/ReleaseRootFs.js"
import { ReleaseRoot } from "../services/ReleaseRoot.js"
import { runCgi } from "../src/adapters/Cgi.js"
import { tools } from "../src/tools/Registry.js"
import { runStreamServer } from "../src/watch/StreamServer.js"

// Served from Fossil's extension root (see docs in src/adapters/Cgi.ts). Fossil clears the
// environment, so the executable in the extension root names node by its full path.
// `ocx2-cgi --stream-server` is the node's stream server (src/watch/StreamServer.ts), which the
// run page starts when it needs one: the root is its own program's, never a request's.
if (process.argv.includes("--stream-server")) {
  Effect.runPromise(Effect.flatMap(ReleaseRoot, (releases) => releases.rootOfProgram(process.argv[1])).pipe(Effect.provide(ReleaseRootFs.layer)))
    .then((root) => {
      if (root === undefined) throw new Error(`${process.argv[1]} was not released into a root: the stream server serves a root's node`)
      return runStreamServer(root)
    })
    .catch((e) => {
      console.error(`the stream server failed: ${(e as Error).message}`)
      process.exit(1)
    })
} else {
  runCgi(tools, ReleaseRootFs.layer).then(
    () => process.exit(0),
    () => process.exit(1)
  )
}
