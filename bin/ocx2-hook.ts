import { hookMain } from "../src/node/HookFast.js"

// Fossil's after-receive hook: ROOT/ocx2-hook --log ROOT/node/hook.log %R (src/node/HookFast.ts)
hookMain(process.argv.slice(2), process.argv[1])
