import * as Effect from "effect/Effect"
import { acceptRelease, AcceptOutput, RootInput } from "../release/acceptRelease.js"
import { needsSetup } from "./stage.js"
import { defineTool } from "./Tool.js"

export const accept = defineTool({
  name: "accept",
  summary: "Serve the next release as current",
  description:
    "Serves the release staged as next as the active release (ROOT/current), and keeps the release it replaces as " +
    "previous (ROOT/previous); next stays as it is, so the pre-release page runs the same release until the next " +
    "stage. Accepting what is already current changes nothing. ROOT/ocx2-hook links to current/ocx2-hook, so the " +
    "hook follows every accept and rollback. Each link is switched atomically, so a hook starting meanwhile runs the " +
    "old release or the new one. Refused when nothing is staged as next. Needs Fossil's setup capability (s). " +
    "Once a release is served, only the active release accepts (ROOT/current/ocx2, the page ocx2-cgi); the " +
    "pre-release candidate (ROOT/next/ocx2, the page ocx2-cgi-next) accepts only a node's first release, and a " +
    "program of any other release of the root is refused. --root ROOT defaults to the root this program was released " +
    "into; a program released into no root (a checkout's) accepts with --root ROOT from a terminal, to recover. The web " +
    "page acts on the release root that serves it and takes none from the request.",
  input: RootInput,
  positional: [],
  output: AcceptOutput,
  allow: needsSetup("accept"),
  handle: (input, context) => acceptRelease(input, context, process.argv[1])
})
