// The hook's slow path as a bundle of its own: src/node/HookFast.ts loads it only when
// something that arrived may hold a message, so a receipt carrying no run costs little; the
// tools that have this host's node act at once (create, stop, run) load it the same way.
export { runHookRound, runPersonStart } from "../src/node/Round.js"
