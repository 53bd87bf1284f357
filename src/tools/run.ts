// Seed 001, "Start a manual run by hand": a run whose process.manual is true waits for a person;
// `run RUN` has this host's node decide it as started by a person and hand it to a watcher.

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Repository } from "../../services/Repository.js"
import { readRunRecord } from "../pickup/RunRecord.js"
import { fullHashOf } from "./stop.js"
import { loadRound, thisHostNode } from "./support/ActAtOnce.js"
import { finish, recording, refuse } from "../operations/Operations.js"
import { servedFile } from "./support/RepositoryFile.js"
import { localLayers } from "./support/ServedLayers.js"
import { defineTool } from "./Tool.js"
import { needsAdminOrSetup } from "./support/Permissions.js"

export const RunInput = Schema.Struct({
  run: Schema.String.annotations({ description: "the manual run to start: its hash or a prefix" })
})

export const RunOutput = Schema.Struct({
  run: Schema.String.annotations({ description: "the run's full hash" }),
  to: Schema.String.annotations({ description: "the run's node user: this host's node" }),
  acted: Schema.String.annotations({ description: "what this host's node did, or in a dry run would do" })
})
export type RunOutput = typeof RunOutput.Type

export const run = defineTool({
  name: "run",
  summary: "Start a manual run by hand",
  description:
    "Starts a run whose process.manual is true, which its node leaves waiting for a person, for a user holding admin or setup. " +
    "This host's node decides it as started by a person and hands it to a watcher, which prepares it, writes its started, " +
    "runs its program and writes its ended, all as the node user. Refused: a run that is not manual, a run of another node, " +
    "one that is not waiting for a person (being started, started or over), and one the node refuses, with the note. " +
    "Acts on the served repository (--repository on its host, or its web page).",
  input: RunInput,
  positional: ["run"],
  output: RunOutput,
  allow: needsAdminOrSetup("run", "a manual run waits for a user holding one of them"),
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(
      act,
      Effect.flatMap(servedFile("run", context), (served) =>
        Effect.gen(function*() {
          const repository = yield* Repository
          const hash = fullHashOf(input.run, yield* repository.artifact(input.run))
          const record = yield* readRunRecord(hash).pipe(
            Effect.catchTag("NotFound", () => refuse(`${hash} holds no run: it is neither a forum post nor a ticket change`))
          )
          const to = record.message?.to
          if (record.message === undefined || to === undefined) return yield* refuse(`${hash} holds no run`)
          const node = yield* thisHostNode(served.path)
          if (node === undefined) return yield* refuse(`this host's hook on ${served.path} is no node: install it with hook --node USER`)
          if (to !== node.nodeUser) return yield* refuse(`the run ${hash} is for ${to}, another node than this host's ${node.nodeUser}`)
          if (record.ended !== undefined) {
            const ended = record.ended.content
            return yield* refuse(ended.outcome === "refused"
              ? `the node refused the run ${hash}: ${ended.note ?? ""}`
              : `the run ${hash} is over (${ended.outcome}): it is not waiting for a person`)
          }
          if (record.started !== undefined) return yield* refuse(`the run ${hash} has started: it is not waiting for a person`)
          const manual = (record.message.block["run"] as { process?: { manual?: unknown } } | undefined)?.process?.manual
          if (manual !== true) return yield* refuse(`the run ${hash} is not manual: its node starts it itself`)
          const { runPersonStart } = yield* Effect.promise(loadRound)
          const acted = yield* Effect.tryPromise(() => runPersonStart(node, hash, context.dryRun))
          // the node's own words decide whether it was started or refused, and why
          // a run whose process user has another run in care is handed on too, and starts once that one is over
          if (!/handed to a watcher, which starts it|has another run in this node's care; it starts once/.test(acted)) return yield* refuse(`this host's node does not start the run ${hash}: ${acted}`)
          act.note("node", `${node.nodeUser} on ${node.root}: ${acted}`)
          yield* act("start", `the watcher of ${hash}, as started by ${context.caller.user ?? "a person"}`, Effect.void)
          return { run: hash, to, acted } satisfies RunOutput
        }).pipe(Effect.provide(localLayers(served.path))))
    )
  }
})
