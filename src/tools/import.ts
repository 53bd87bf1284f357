import { ImportInput, ImportOutput, importRepository } from "./support/ImportRepository.js"
import { needsSetup } from "./support/Permissions.js"
import { defineTool } from "./Tool.js"

export const gitImport = defineTool({
  name: "import",
  summary: "Make a new repository of a git repository, beside the served one",
  description:
    "Makes NAME (with the served repository's extension, beside it, served at its URL with NAME as the last part) of " +
    "the git repository UPSTREAM (an http, https or git URL, or a directory on the served host): its branches imported " +
    "in a sandbox (bubblewrap, as a run's process), the upstream's own branch as trunk; its git export made in " +
    "--mirrors DIR (by default beside the served repository's), as DIR/NAME, seeded with the upstream's commits so " +
    "Fossil's exports are fast-forwards of them (the upstream's tags stay git's); its admin the caller (fossil import -A, " +
    "a random password kept nowhere); it joins the served repository's login group (made of the two, named for the " +
    "served one, where there is none), so signing in to one signs in to both; the hook installed on it as on the served " +
    "one; its email-url the served one's with NAME. A bad NAME, or a repository or export already there, is refused; an " +
    "import that fails leaves nothing, leaving the login group first. Needs Fossil's setup capability (s).",
  input: ImportInput,
  positional: ["upstream", "name"],
  output: ImportOutput,
  allow: needsSetup("import"),
  offeredBy: ["cli", "cgi"], notOfferedBecause: "a sandbox has no served repository",
  handle: (input, context) => importRepository(input, context)
})
