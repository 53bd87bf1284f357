import { HookInput, HookOutput, installHook } from "./support/HookSetup.js"
import { needsSetup } from "./support/Permissions.js"
import { defineTool } from "./Tool.js"

export const hook = defineTool({
  name: "hook",
  summary: "Install the hook, and start the node",
  description:
    "Installs ROOT/ocx2-hook --log ROOT/node/hook.log %R as the served repository's after-receive hook (the global " +
    "--repository names it); ROOT/ocx2-hook follows current, so the hook runs the served release after every accept " +
    "and rollback. A hook that runs ocx2-hook with another command is replaced; the repository's other hooks are left " +
    "alone; installing again changes nothing. With --node USER (a user holding no capability of its own) the hook is " +
    "that node: ROOT/node/node.json names it, and installing is the node starting: every open run for USER is checked, " +
    "one whose watcher is gone answered lost, a missed stop sent on, one never started handed on; run it again after " +
    "the host restarts. --check, with --node USER, asks for exactly that start, the restart recovery: every open run " +
    "for USER decided, whether or not the hook is installed (installing again changes nothing), and the answer says so " +
    "(check, why); --check without --node is refused. --fast turns on fast pickup (backoffice-disable on, ROOT/ocx2-hook --poll started, Fossil's own poller of the repository ended: its backoffice refuses people's posts). A root " +
    "that serves no release is refused. Needs Fossil's setup capability (s).",
  input: HookInput,
  positional: [],
  output: HookOutput,
  allow: needsSetup("hook"),
  offeredBy: ["cli", "cgi"], notOfferedBecause: "a sandbox has no served repository",
  handle: (input, context) => installHook(input, context, process.argv[1])
})
