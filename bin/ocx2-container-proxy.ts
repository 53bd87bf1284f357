// The container proxy (docs/containers.md section 10): the deployer starts it in every container
// and the server dials it on port 14979. It reads no environment and takes no argument: what it
// starts beside itself is the launch file the deployer binds read-only at /.proxy/launch.json.
import * as Fs from "node:fs"
import { ContainerProxy } from "../src/containers/proxy/ContainerProxy.js"
import { fuseModule } from "../src/containers/proxy/FuseModule.js"
import { decodeLaunch, launchPath, memoryEventsPath } from "../src/containers/proxy/Launch.js"

const log = (line: string) => process.stderr.write(line + "\n")
let text: string
try {
  text = Fs.readFileSync(launchPath, "utf8")
} catch (e) {
  log(`ocx2-container-proxy: cannot read the launch file ${launchPath}: ${(e as Error).message}`)
  process.exit(1)
}
const launch = decodeLaunch(text)
if (typeof launch === "string") {
  log(`ocx2-container-proxy: ${launch} (${launchPath})`)
  process.exit(1)
}
const oomKills = (): number | undefined => {
  try {
    const line = Fs.readFileSync(memoryEventsPath, "utf8").split("\n").find((l) => l.startsWith("oom_kill "))
    return line === undefined ? undefined : Number(line.slice("oom_kill ".length))
  } catch {
    return undefined
  }
}
new ContainerProxy({ launch, mountFuse: fuseModule, oomKills, log }).run().then(
  () => process.exit(0),
  (e: unknown) => {
    log(`ocx2-container-proxy: ${e instanceof Error ? e.message : String(e)}`)
    process.exit(1)
  }
)
