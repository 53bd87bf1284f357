// `ocx2 supervise ...`, the node's resident supervisor (src/node/Supervisor.ts). It is the node's
// round kept running, so it is loaded from the round's bundle beside the program (ocx2-hook-round),
// and the CLI's own start-up carries none of it.

import { loadSibling } from "../../Siblings.js"

type SupervisorModule = typeof import("../../../bin/ocx2-hook-round.js")

export const runSuperviseCommand = async (args: ReadonlyArray<string>): Promise<number> => {
  const fromSource = "../../bin/ocx2-hook-round.js" // not followed by the bundler
  const module = await loadSibling<SupervisorModule>("ocx2-hook-round", typeof OCX2_BUNDLED === "undefined" ? () => import(fromSource) : undefined)
  return module.runSupervisor(args)
}
