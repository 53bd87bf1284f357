import { removeHook, RootOnlyInput, UnhookOutput } from "./support/HookSetup.js"
import { needsSetup } from "./support/Permissions.js"
import { defineTool } from "./Tool.js"

export const unhook = defineTool({
  name: "unhook",
  summary: "Remove the hook",
  description:
    "Removes every after-receive hook of the served repository (the global --repository) that runs ocx2-hook, from any " +
    "root; leaves the repository's other hooks and the hook's log (ROOT/node/hook.log). Needs Fossil's setup capability (s).",
  input: RootOnlyInput,
  positional: [],
  output: UnhookOutput,
  allow: needsSetup("unhook"),
  offeredBy: ["cli", "cgi"], notOfferedBecause: "a sandbox has no served repository",
  handle: (input, context) => removeHook(input, context, process.argv[1])
})
