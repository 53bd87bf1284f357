// `ocx2 supervise ...`, the node's resident supervisor (src/node/Supervisor.ts). It is the node's
// round kept running, so it is loaded from the round's bundle beside the program (ocx2-hook-round),
// and the CLI's own start-up carries none of it.

import { hookRound } from "../../Bundles.js"

export const runSuperviseCommand = async (args: ReadonlyArray<string>): Promise<number> =>
  (await hookRound.load()).runSupervisor(args)
