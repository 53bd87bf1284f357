import { runCgi } from "../src/adapters/Cgi.js"
import { tools } from "../src/tools/registry.js"

// Served from Fossil's extension root (see docs in src/adapters/Cgi.ts). Fossil clears the
// environment, so the executable in the extension root names node by its full path.
runCgi(tools).then(
  () => process.exit(0),
  () => process.exit(1)
)
