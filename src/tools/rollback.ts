import * as Effect from "effect/Effect"
import { RootInput } from "../release/acceptRelease.js"
import { rollbackRelease, RollbackOutput } from "../release/rollbackRelease.js"
import { needsSetup } from "./stage.js"
import { defineTool } from "./Tool.js"

export const rollback = defineTool({
  name: "rollback",
  summary: "Serve the previous release again",
  description:
    "Serves the previous release (ROOT/previous) as current again, and keeps the release it replaces as previous: " +
    "current and previous trade places, so a second rollback undoes the first. The hook (ROOT/ocx2-hook, a link to " +
    "current/ocx2-hook) follows. Each link is switched atomically. Refused when there is no previous release. Needs " +
    "Fossil's setup capability (s). Only the active release (current) or the pre-release candidate (next) rolls back; " +
    "a program of any other release of the root is refused. --root ROOT defaults to the root this program was released " +
    "into; a program released into no root (a checkout's) rolls back with --root ROOT from a terminal, to recover. The " +
    "web page acts on the release root that serves it and takes none from the request.",
  input: RootInput,
  positional: [],
  output: RollbackOutput,
  allow: needsSetup("rollback"),
  handle: (input, context) => rollbackRelease(input, context, process.argv[1])
})
