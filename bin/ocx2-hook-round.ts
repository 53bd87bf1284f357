// The hook's slow path as a bundle of its own: src/node/HookFast.ts loads it only when
// something that arrived may hold a message, so a receipt carrying no run costs little.
export { runHookRound } from "../src/node/Round.js"
