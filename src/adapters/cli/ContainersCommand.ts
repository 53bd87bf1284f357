// `ocx2 containers ...`, a client of the tool-container server (docs/containers.md). Loaded only
// for that command, from its bundle beside the program (ocx2-containers-client), so the CLI's own
// start-up carries no WebSocket client.

import { loadSibling } from "../../Siblings.js"

type ContainersModule = typeof import("../../containers/ContainersCli.js")

export const runContainersCommand = async (args: ReadonlyArray<string>): Promise<number> => {
  const fromSource = "../containers/ContainersCli.js" // not followed by the bundler
  const module = await loadSibling<ContainersModule>("ocx2-containers-client", typeof OCX2_BUNDLED === "undefined" ? () => import(fromSource) : undefined)
  return module.runContainersCli(args)
}
