// ocx2 node --repository CLONE SERVER-URL PASSWORDS-FILE [--check] (seed 001, "Add a node on
// another host"): the node on a clone's host, one call at a time, run from a timer. Each call
// checks the passwords file and the clone, signs in to the server as the node user, pulls, and
// decides what the pull brought (CloneRound); with --check, or when it has never run here, or
// when the host restarted since the call that last checked, it is the node starting and decides
// every open run for its user instead (Round.startNode, as `hook --node` on the server's host).
// Before either, it sends what dead watchers left unsent in their outboxes (ROOT/care/RUN.outbox:
// the server was down when they wrote, then they were gone), so an outcome that exists is sent,
// never answered lost.

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import { Hosts } from "../../services/Hosts.js"
import { Receipts } from "../../services/Receipts.js"
import { type Act, CallRefused, finish, refuse } from "../operations/Operations.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { rootToActOn } from "../release/Served.js"
import { bootId, cloneEntryOf, readCloneRemote, writeCloneEntry } from "../root/CloneFiles.js"
import { clonePlaceOf, readPasswordsFile } from "../root/ClonePasswords.js"
import { pullClone } from "../fossil/Pull.js"
import { cloneRound } from "./CloneRound.js"
import { canonicalRepository, cursorFileOf, readCursor } from "../root/HookFiles.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { finishLeftOutboxes } from "./Recovery.js"
import { startNode, watcherOf } from "./Round.js"

/** What a call asks: the tool's input (src/tools/node.ts). */
export interface NodeRequest {
  readonly server_url: string
  readonly passwords_file: string
  readonly check?: boolean
  readonly root?: string
}

/** What a call did: the tool's output. */
export interface NodeAnswer {
  readonly repository: string
  readonly server: string
  readonly user: string
  readonly root: string
  readonly check: boolean
  readonly why: string
  readonly runs: ReadonlyArray<{ readonly run: string; readonly action: string }>
}

/** The call failed (the pull, the server, the care directory): the first line of why, since a program's words can run to many. */
export class NodeFailed extends Schema.TaggedError<NodeFailed>()("NodeFailed", {
  message: Schema.String
}) {}

/** The same server, however its URL is written (a trailing slash, an explicit default port). */
const sameServer = (a: string, b: string): boolean => {
  try {
    const x = new URL(a)
    const y = new URL(b)
    const path = (u: URL) => u.pathname.replace(/\/+$/, "")
    return x.protocol === y.protocol && x.host === y.host && path(x) === path(y)
  } catch {
    return false
  }
}

const firstLine = (words: string): string => words.split("\n")[0]!

/**
 * One call of the clone's node, as `ocx2 node` makes it and the clone's supervisor at its start:
 * what it did recorded in `act` (a dry run's only recorded), its answer when it ran to the end.
 */
export const runCloneNode = (input: NodeRequest, context: { readonly repository: string | undefined }, act: Act, programPath: string | undefined) => {
  const program = Effect.gen(function*() {
    const hosts = yield* Hosts
    if (context.repository === undefined) {
      return yield* refuse("node works from a clone: name it with --repository CLONE before the tool's name")
    }
    const repository = canonicalRepository(context.repository)
    if (!Fs.existsSync(repository)) return yield* refuse(`no clone ${repository}`)

    const passwordsRead = readPasswordsFile(input.passwords_file)
    if (passwordsRead._tag === "Refused") return yield* refuse(`${passwordsRead.why}; nothing was done`)
    const passwords = passwordsRead.passwords
    act.note("passwords", `${passwords.file}: the password of ${passwords.user}, readable by this account alone`)

    const cloneRead = readCloneRemote(repository)
    if (cloneRead._tag === "Refused") return yield* refuse(cloneRead.why)
    const remote = cloneRead.remote
    if (remote.user !== passwords.user) {
      return yield* refuse(
        `${repository} pulls as ${remote.user}, but the passwords file is ${passwords.user}'s: clone the server as ${passwords.user} (fossil clone --save-http-password)`
      )
    }
    if (!sameServer(remote.url, input.server_url)) {
      return yield* refuse(`${repository} is a clone of ${remote.url}, not of ${input.server_url}`)
    }
    act.note("clone", `${repository}: server-code ${remote.serverCode}, a clone of ${remote.url} as ${remote.user}`)

    const root = yield* rootToActOn("node", input.root, programPath)
    if (!Fs.existsSync(releasePaths(root).current)) {
      return yield* refuse(`${root} serves no release (${releasePaths(root).current} is missing): no watcher could run a run; install a release first`)
    }
    if (passwords.file.startsWith(`${root}/`)) {
      act.note("passwords", `${passwords.file} lies within ${root}; refusal 7 keeps runs away from it, but keep it outside the root`)
    }

    // signing in as the node user: a login that fails, or a node user holding admin or setup, is refused here
    const serverReceipts = yield* Receipts.pipe(Effect.provide(hosts.serverReceipts({ url: input.server_url, user: passwords.user, password: passwords.password })))
    const capabilities = yield* serverReceipts.capabilitiesOf(passwords.user).pipe(
        Effect.catchTag("ReceiptsUnavailable", (e) => refuse(`signing in to ${input.server_url} as ${passwords.user}: ${e.reason}`))
      )
    if (capabilities === undefined) return yield* refuse(`${input.server_url} has no user ${passwords.user}`)
    if (/[as]/.test(capabilities)) {
      return yield* refuse(`${passwords.user} holds admin or setup on the server (${capabilities}): a node user holds o and i and nothing more`)
    }
    act.note("sign in", `${input.server_url} as ${passwords.user}, holding ${capabilities}`)

    const config: NodeConfig = {
      root,
      repository,
      nodeUser: passwords.user,
      serverUrl: input.server_url,
      passwordsFile: passwords.file
    }
    const entry = cloneEntryOf(root, repository)
    const cursor = readCursor(cursorFileOf(root, repository, config.nodeUser))
    const boot = bootId()
    const why = input.check === true ? "asked with --check"
      : cursor === undefined ? "the node has not run on this clone before: it starts"
      : entry?.bootId !== undefined && boot !== undefined && entry.bootId !== boot ? "the host restarted since the node last started: it starts again"
      : undefined
    const check = why !== undefined

    yield* act("register", `${repository} is node ${config.nodeUser} of ${input.server_url} in ROOT/node/clones.json (its watchers read it)`,
      Effect.sync(() => writeCloneEntry(root, repository, {
        user: config.nodeUser,
        serverUrl: input.server_url,
        passwordsFile: passwords.file,
        ...(entry?.bootId !== undefined ? { bootId: entry.bootId } : {})
      })))
    yield* act("pull", `fossil pull -R ${repository} (as ${remote.user}, with the password the clone remembers)`, pullClone(repository))

    const watcherProgram = watcherOf(root)
    const layer = hosts.clone(clonePlaceOf(config, passwords), { pull: !act.dryRun })
    const left = yield* finishLeftOutboxes(act).pipe(Effect.provide(layer))
    let runs: ReadonlyArray<{ run: string; action: string }>
    if (check) {
      act.note("check", `${why}: every open run for ${config.nodeUser} on this clone is decided again`)
      const started = yield* startNode(config, act, { watcherProgram, dryRun: act.dryRun }).pipe(Effect.provide(layer))
      runs = started.decisions
      if (boot !== undefined) {
        yield* act("boot", `the node started on boot ${boot}`, Effect.sync(() => writeCloneEntry(root, repository, {
          user: config.nodeUser, serverUrl: input.server_url, passwordsFile: passwords.file, bootId: boot
        })))
      }
    } else {
      const round = yield* cloneRound(config, act, { watcherProgram }).pipe(Effect.provide(layer))
      runs = round.decisions
    }
    runs = [...left, ...runs]
    for (const r of runs) act.note("run", `${r.run}: ${r.action}`)
    const output: NodeAnswer = {
      repository,
      server: input.server_url,
      user: config.nodeUser,
      root,
      check,
      why: why ?? "what the pull brought, after the node's cursor",
      runs: runs.map((r) => ({ run: r.run, action: r.action }))
    }
    return output
  })
  return finish(act, program.pipe(
    Effect.mapError((e) => e instanceof CallRefused
      ? new CallRefused({ message: firstLine(e.message) })
      : new NodeFailed({ message: firstLine(e.message) }))
  ))
}
