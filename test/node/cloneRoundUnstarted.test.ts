// A clone's round before the node has started there (`ocx2 node --check` never ran): it decides
// nothing and fails with NodeNotStarted, whose words tell the person what to run.
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { CareDirectory } from "../../services/CareDirectory.js"
import * as MemoryCareDirectory from "../../layers/MemoryCareDirectory.js"
import * as TestReceipts from "../../layers/TestReceipts.js"
import * as TestSandboxLauncher from "../../layers/TestSandboxLauncher.js"
import * as TestRepository from "../../layers/TestRepository.js"
import { actNow } from "../../src/operations/Operations.js"
import { cloneRound, NodeNotStarted } from "../../src/node/CloneRound.js"

describe("a clone's round where the node has not started", () => {
  it.effect("fails with NodeNotStarted, naming the clone and what to run", () =>
    Effect.gen(function*() {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-clone-round-"))
      const repository = Path.join(root, "lab2.fossil")
      const config = { root, repository, nodeUser: "lab2", serverUrl: "http://127.0.0.1:1/", passwordsFile: undefined }
      const care = MemoryCareDirectory.make()
      const layer = Layer.mergeAll(Layer.succeed(CareDirectory, care.service), TestRepository.layer(), TestReceipts.layer(), TestSandboxLauncher.layer().layer)
      const exit = yield* cloneRound(config, actNow, { watcherProgram: "/nonexistent/ocx2-watcher" }).pipe(Effect.provide(layer), Effect.exit)
      Fs.rmSync(root, { recursive: true, force: true })
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) {
        const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
        expect(failure).toBeInstanceOf(NodeNotStarted)
        expect((failure as NodeNotStarted).message).toBe(`the node has not started on ${repository}: run ocx2 node with --check`)
      }
    }))
})
