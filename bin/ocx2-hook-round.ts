// The hook's slow path as a bundle of its own: src/node/HookFast.ts loads it only when
// something that arrived may hold a message, so a receipt carrying no run costs little; the
// tools that have this host's node act at once (create, stop, run) load it the same way, and
// `ocx2 supervise` runs the node's supervisor from it (it is the round, resident).
export { runHookRound, runPersonStart } from "../src/node/Round.js"
export { runSupervisor } from "../src/node/Supervisor.js"
