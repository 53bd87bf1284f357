// ocx2-listen --repository REPO [--repository REPO ...] [--root ROOT] [--host H] [--port P] [--url URL]:
// the fleet's listener (src/listen/Listener.ts; docs/operations.md, "A fleet"), one resident process on
// the server's host holding every clone node's question until a receipt lands, for the service
// (docs/systemd/ocx2-listen.service). ROOT is the release root this program was released into
// unless given; where it listens and the address clones are given come from ROOT/settings/listen,
// each overridden by its flag. SIGTERM answers every held question and ends it.
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as FossilReceipts from "../layers/FossilReceipts.js"
import * as FossilRepository from "../layers/FossilRepository.js"
import { listenSettings } from "../src/listen/ListenFiles.js"
import { listen } from "../src/listen/Listener.js"
import { releaseOfProgram } from "../src/release/ReleasePaths.js"

const usage = "usage: ocx2-listen --repository REPO [--repository REPO ...] [--root ROOT] [--host HOST] [--port PORT] [--url URL]"

const fail = (message: string, code = 2): never => {
  process.stderr.write(`ocx2-listen: ${message}\n${code === 2 ? `${usage}\n` : ""}`)
  process.exit(code)
}

const args = process.argv.slice(2)
const repositories: Array<string> = []
const given: { root?: string; host?: string; port?: string; url?: string } = {}
for (let i = 0; i < args.length; i++) {
  const flag = args[i]!
  const value = args[i + 1]
  if (!["--repository", "--root", "--host", "--port", "--url"].includes(flag)) fail(`${flag} is not an option of ocx2-listen`)
  if (value === undefined || value.startsWith("--")) fail(`${flag} needs a value`)
  i++
  if (flag === "--repository") repositories.push(value!)
  else given[flag.slice(2) as "root" | "host" | "port" | "url"] = value!
}
if (repositories.length === 0) fail("name the served repository it listens for: --repository REPO")
for (const repository of repositories) {
  if (!Fs.existsSync(repository)) fail(`--repository ${repository}: no such file`, 1)
}
const root = given.root ?? (() => {
  try {
    return releaseOfProgram(Fs.realpathSync(process.argv[1]!))?.root
  } catch {
    return undefined
  }
})()
if (root === undefined) fail("this program is no release's (ROOT/staged/NAME/ocx2-listen): give --root ROOT, the release root whose pages name it")
const settings = listenSettings(root!)
const port = given.port === undefined ? settings.port : Number(given.port)
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port ${given.port}: not a port (0 to 65535)`)
if (given.url !== undefined && !/^https?:\/\//.test(given.url)) fail(`--url ${given.url}: an http or https address, such as https://fossil.example.org/ocx2-listen`)
const url = given.url?.replace(/\/+$/, "") ?? settings.url

const record = (path: string) => Layer.mergeAll(FossilRepository.layer({ path }), FossilReceipts.layer({ path }))

const fiber = Effect.runFork(Effect.scoped(Effect.gen(function*() {
  yield* listen({ root: root!, repositories, host: given.host ?? settings.host, port, url, record })
  return yield* Effect.never
})))
const stop = (code: number) => () => {
  Effect.runPromise(Fiber.interrupt(fiber)).then(() => process.exit(code), () => process.exit(code))
}
process.on("SIGTERM", stop(0))
process.on("SIGINT", stop(130))
fiber.addObserver((exit) => {
  if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) {
    const error = Exit.isFailure(exit) ? String(exit.cause) : ""
    process.stderr.write(`ocx2-listen: ${error}\n`)
    process.exit(1)
  }
})
