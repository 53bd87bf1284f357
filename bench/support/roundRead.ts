// One node round's read of the repository, in a fresh process as the hook makes it: the layer
// built, the file opened, every item after the cursor read and decoded, the node's messages
// picked out. Bundled twice by bench/inflate.ts (with the hand-written decoder and with node's
// zlib alone) and run as `node roundRead.mjs REPOSITORY RCVID RID`; prints one JSON line.
import * as Effect from "effect/Effect"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { nodeMessagesAfter } from "../../src/node/Round.js"

const [repository, rcvid, rid] = process.argv.slice(2)
const loaded = performance.now()
const result = await Effect.runPromise(Effect.scoped(
  nodeMessagesAfter("lab", { rcvid: Number(rcvid), rid: Number(rid) })
    .pipe(Effect.provide(FossilRepository.layer({ path: repository! })))
))
const read = performance.now() - loaded
console.log(JSON.stringify({ readMs: read, messages: result.messages.length, sinceStartMs: performance.now() }))
