// The OCX pages whole, as a bundle of its own: bin/ocx2-cgi.ts runs it for every request but a
// receipt question (bin/ocx2-cgi-receipt.ts), and for the stream server.

import * as Effect from "effect/Effect"
import * as ReleaseRootFs from "../layers/ReleaseRootFs.js"
import { ReleaseRoot } from "../services/ReleaseRoot.js"
import { runCgi } from "../src/adapters/Cgi.js"
import { tools } from "../src/tools/Registry.js"
import { runStreamServer } from "../src/follow/StreamServer.js"

/** Answers the CGI request in this process's environment with every tool the web offers. */
export const runPages = (program: string | undefined = process.argv[1]): Promise<void> => runCgi(tools, ReleaseRootFs.layer, process.env, program)

/** The node's stream server of the root `program` was released into (the run page starts it). */
export const runRootStreamServer = async (program: string | undefined = process.argv[1]): Promise<void> => {
  const root = await Effect.runPromise(Effect.flatMap(ReleaseRoot, (releases) => releases.rootOfProgram(program)).pipe(Effect.provide(ReleaseRootFs.layer)))
  if (root === undefined) throw new Error(`${program} was not released into a root: the stream server serves a root's node`)
  return runStreamServer(root)
}
