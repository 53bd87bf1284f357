// `ocx2 containers ...`, a client of the tool-container server (docs/containers.md). Loaded only
// for that command, from its bundle beside the program (ocx2-containers-client), so the CLI's own
// start-up carries no WebSocket client.

import { containersClient } from "../../Bundles.js"

export const runContainersCommand = async (args: ReadonlyArray<string>): Promise<number> =>
  (await containersClient.load()).runContainersCli(args)
