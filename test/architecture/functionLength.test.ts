/**
 * No closure longer than a screen (issue 41): no function in src/, services/ or layers/ is over 80
 * lines, read from the TypeScript syntax tree (the `typescript` package's parser). A layer's `make`
 * assembles named module-level functions, as Effect's own `makeFileSystem` does, so that each
 * operation can be read, named and tested alone. The old ones not split yet are named below, each
 * with why; the list only shrinks: an entry whose function is gone or now within 80 lines fails
 * too, so it is taken out.
 *
 * A function is named by the path of named things it stands in (`Class.method`, `make.standUp`);
 * an anonymous one (the generator an `Effect.gen` runs, a callback) counts as the named function
 * it stands in, whose length is the longest of them.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import ts from "typescript"
import { describe, expect, it } from "vitest"

const repo = Path.resolve(import.meta.dirname, "..", "..")
const scanned = ["src", "services", "layers"]
const limit = 80

const sourceFiles = (dir: string): Array<string> =>
  Fs.readdirSync(Path.join(repo, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = Path.posix.join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(relative)
    return /\.(ts|mts)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [relative] : []
  })

const textOf = (name: ts.Node | undefined): string | undefined =>
  name !== undefined && (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isPrivateIdentifier(name)) ? name.text : undefined

/** A function's own name, or the name it is given (`const f = () => ...`, `{ f: () => ... }`); none for a callback. */
const nameOf = (node: ts.SignatureDeclaration): string | undefined => {
  if (ts.isConstructorDeclaration(node)) return "constructor"
  const own = textOf(node.name)
  if (own !== undefined) return own
  const parent = node.parent
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) return textOf(parent.name)
  return undefined
}

/** "FILE NAME" -> lines, of every function over the limit. */
const longFunctions = (): Map<string, number> => {
  const found = new Map<string, number>()
  for (const file of scanned.flatMap(sourceFiles)) {
    const source = ts.createSourceFile(file, Fs.readFileSync(Path.join(repo, file), "utf8"), ts.ScriptTarget.Latest, true)
    const lineOf = (position: number) => source.getLineAndCharacterOfPosition(position).line
    const visit = (node: ts.Node, path: ReadonlyArray<string>): void => {
      let inside = path
      if (ts.isClassLike(node) && node.name !== undefined) inside = [...path, node.name.text]
      if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
        const name = nameOf(node)
        if (name !== undefined) inside = [...inside, name]
        const lines = lineOf(node.end) - lineOf(node.getStart(source)) + 1
        const key = `${file} ${inside.length > 0 ? inside.join(".") : "(anonymous)"}`
        if (lines > limit && (found.get(key) ?? 0) < lines) found.set(key, lines)
      }
      ts.forEachChild(node, (child) => visit(child, inside))
    }
    visit(source, [])
  }
  return found
}

const containersEffect = "the tool-container server moves to Effect at its boundaries (issue 41), in its own change"
const pages = "the pages are being reworked (issue 40) in their own change"

/**
 * Functions over the limit today, not split yet: "FILE NAME" -> why it stays. The list only shrinks.
 */
const allowed: Readonly<Record<string, string>> = {
  "src/tools/support/NodeInit.ts initNode": "init's steps in the order it says and checks them, each skipped when one it needs failed: not split yet",
  "src/tools/doctor.ts doctorCheck": "doctor's checks in the order it reports them: not split yet",
  "layers/BwrapDeployer.ts make": "the bubblewrap deployer's layer: its operations not made module-level functions yet",
  "layers/BwrapDeployer.ts make.standUp": "a container's stand-up in the order its parts are made and undone on failure: not split yet",
  "layers/StoreImageSource.ts make": "the image store's layer: its operations not made module-level functions yet",
  "layers/RemoteReceipts.ts make": "the remote receipts' layer: its operations not made module-level functions yet",
  "src/watcher/Spare.ts serveAsSpare": "the spare watcher's wait and take-over: not split yet",
  "src/adapters/cli/Front.ts frontDoor": "the CLI's front door (usage, help, the tools' commands): not split yet",
  "src/node/Round.ts decideRun": "a run's decision on a round, each refusal and hand-off in order: not split yet",
  "src/containers/fuse/FuseSession.ts Session.serve": containersEffect,
  "src/containers/ContainersCli.ts cli": containersEffect,
  "src/watcher/Watcher.ts startChecked": "the watcher's start of a checked run: not split yet",
  "src/follow/Follow.ts follow": "following a run's stream and record: not split yet (src/follow is being renamed)",
  "src/follow/StreamServer.ts runStreamServer": "the stream server's requests: not split yet (src/follow is being renamed)",
  "src/git/FastExportBranches.ts relabelStream": "one pass over git fast-export's stream, a hot path over every commit: not split yet",
  "src/containers/ContainerRun.ts ContainerRun.steps": containersEffect,
  "src/adapters/Cgi.ts makeCgi": pages,
  "src/node/CloneNode.ts runCloneNode": "a clone node's round (pull, decide, push): not split yet",
  "src/tools/read.ts readRecord": "the read tool's record, in the order it answers: not split yet",
  "src/tools/support/ImportRepository.ts importRepository": "import's steps in order: not split yet",
  "src/tools/support/HookSetup.ts installHook": "hook's steps in order: not split yet",
  "src/adapters/OutputPages.ts liveScript": pages,
  "src/watcher/Watcher.ts runInCare": "the watcher's run under its lock: not split yet",
  "src/watcher/Workspace.ts performSteps": "the workspace's steps, one case per kind: not split yet",
  "src/tools/create.ts handle": "create's body: not split yet",
  "src/protocol/Steps.ts planRun": "a run's plan, one case per step kind: not split yet",
  "src/tools/watch.ts handle": "watch's body: not split yet (src/follow is being renamed)",
  "src/node/HookFast.ts runHook": "the hook's lean entry, plain code on the path every receipt takes: not split yet",
  "src/sandbox/TerminalChild.ts TerminalChild.constructor": "a terminal child's wiring of its pty's events: not split yet",
  "src/watcher/TerminalServer.ts serveTerminal": "the terminal server's connection: not split yet",
  "src/containers/VolumeEndpoints.ts perform": containersEffect,
  "src/adapters/JsonText.ts firstBadOffset": "one scan of a JSON text, a hand-written state machine: not split yet"
}

describe("no closure longer than a screen", () => {
  const found = longFunctions()

  it("reads the functions it measures", () => {
    // a reader that found nothing would pass every rule: today's allowed ones are found
    expect(found.size).toBeGreaterThan(0)
  })

  it(`no function in ${scanned.join(", ")} is over ${limit} lines, beyond the named old ones`, () => {
    const over = [...found].filter(([key]) => allowed[key] === undefined).map(([key, lines]) => `${key}: ${lines} lines`)
    expect(over).toEqual([])
  })

  it("every named old one is still over the limit (the list shrinks)", () => {
    const stale = Object.keys(allowed).filter((key) => !found.has(key))
    expect(stale).toEqual([])
  })
})
