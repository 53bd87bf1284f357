import * as Effect from "effect/Effect"
import { StageInput, StageOutput, stageRelease } from "../release/stageRelease.js"
import { type Caller, defineTool, hasCapability } from "./Tool.js"

/** stage, accept and rollback each need Fossil's setup capability, and say so in these words. */
export const needsSetup = (tool: string) => (caller: Caller): string | undefined =>
  hasCapability(caller, "s") ? undefined : `${tool} needs Fossil's setup capability (s)`

export const stage = defineTool({
  name: "stage",
  summary: "Check, build and stage a checkout as the next release",
  description:
    "Runs the checkout's own checks (npm run -s gate, written to ROOT/staged/gate.log as they run), builds its " +
    "programs (npm run -s build, into ROOT/staged/build.log), copies each dist/PROGRAM.mjs as the executable " +
    "PROGRAM, with the packages the bundles leave external, into ROOT/staged/NAME (NAME: the first twelve hex digits " +
    "of the checkout's git or Fossil check-in), smokes that copy (ocx2 --json list, into ROOT/staged/smoke.log) and " +
    "offers it as next (ROOT/next). A failing gate, build or smoke leaves next as it was and names its log. A release " +
    "served as current or previous is never replaced. Runs the checkout's own code, so it needs Fossil's setup " +
    "capability (s) and is not offered on the web. --root ROOT defaults to the root this program was released into.",
  input: StageInput,
  positional: ["checkout"],
  output: StageOutput,
  allow: needsSetup("stage"),
  offeredBy: ["cli", "mcp"], notOfferedBecause: "it runs the checkout's own code",
  handle: (input, context) => stageRelease(input, context, process.argv[1])
})
