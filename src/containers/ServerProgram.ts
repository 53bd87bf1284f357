import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Deployer } from "../../services/Deployer.js"
import type { ImageSource } from "../../services/ImageSource.js"
import { siblingPath } from "../Siblings.js"
import { makeServerParts } from "./Parts.js"
import { mintToken, startContainersServer } from "./Server.js"

/**
 * `ocx2-containers serve --root ROOT [--listen HOST:PORT] --deployer bwrap|in-process
 * [--images store|memory] [--store DIR] [--registries FILE] [--spares N]` and
 * `ocx2-containers token IDENTITY --root ROOT`. `bwrap` runs each container for real (as root:
 * layers/BwrapDeployer.ts); `in-process` stands a proxy inside the server that begins, declares no
 * secret and answers nothing else, for trying the protocol without containers. Images come from
 * the store (docs/containers.md section 7), or with `--images memory` are held in memory and never
 * unpacked (for toy images whose layers are not tars).
 */
const usage = `usage:
  ocx2-containers serve --root ROOT [--listen HOST:PORT] --deployer bwrap|in-process
        [--images store|memory] [--store DIR] [--registries FILE] [--spares N]
  ocx2-containers token IDENTITY --root ROOT`

const option = (args: ReadonlyArray<string>, name: string): string | undefined => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? args[i + 1] : undefined
}

/** What the command line chose, checked: the host's assembly (layers/ContainersHost.ts) makes its layers. */
export interface ContainersHostChoice {
  readonly root: string
  readonly images: "store" | "memory"
  readonly store: string
  readonly registries: string
  readonly deployer:
    | { readonly _tag: "in-process" }
    | { readonly _tag: "bwrap"; readonly proxyBundle: string; readonly relayProgram: string; readonly spares?: number }
}

/** undefined: the server runs until a signal ends it */
export const runContainersServer = async (
  args: ReadonlyArray<string>,
  assemble: (choice: ContainersHostChoice) => Layer.Layer<Deployer | ImageSource>
): Promise<number | undefined> => {
  const [command, ...rest] = args
  const root = option(rest, "root")
  const bad = (message: string) => {
    process.stderr.write(`ocx2-containers: ${message}\n${usage}\n`)
    return 2
  }
  if (root === undefined) return bad("name the root: --root ROOT")
  if (command === "token") {
    const identity = rest.find((a, i) => !a.startsWith("--") && rest[i - 1] !== "--root")
    if (identity === undefined) return bad("name the identity")
    process.stdout.write(mintToken(Path.resolve(root), identity) + "\n")
    return 0
  }
  if (command !== "serve") return bad(`unknown command ${JSON.stringify(command ?? "")}`)
  const deployer = option(rest, "deployer")
  if (deployer !== "in-process" && deployer !== "bwrap") return bad("name the deployer: --deployer bwrap (containers) or in-process (a proxy inside the server)")
  const listen = option(rest, "listen") ?? "127.0.0.1:14980"
  const colon = listen.lastIndexOf(":")
  const host = listen.slice(0, colon)
  const port = Number(listen.slice(colon + 1))
  if (colon <= 0 || !Number.isInteger(port) || port < 0 || port > 65535) return bad(`--listen takes HOST:PORT: ${listen}`)
  const resolved = Path.resolve(root)
  const images = option(rest, "images") ?? "store"
  if (images !== "store" && images !== "memory") return bad(`--images takes store or memory: ${images}`)
  let chosen: ContainersHostChoice["deployer"] = { _tag: "in-process" }
  if (deployer === "bwrap") {
    if (process.getuid?.() !== 0) return bad("--deployer bwrap mounts overlays and loop devices and makes cgroups: run it as root")
    const proxyBundle = siblingPath("ocx2-container-proxy")
    // a static program, without the bundles' extension, in dist/ as in a release
    const relayProgram = proxyBundle === undefined ? undefined : Path.join(Path.dirname(proxyBundle), "ocx2-container-relay")
    // and the binder of a taken spare's volumes, found beside the relay (layers/BwrapDeployer.ts)
    const volumesProgram = relayProgram === undefined ? undefined : Path.join(Path.dirname(relayProgram), "ocx2-container-volumes")
    // and the makers of a container's disk and overlay mounts and the C proxy, found beside the relay too
    const others = relayProgram === undefined ? [] : ["ocx2-container-mounts", "ocx2-container-proxy-c"].map((name) => Path.join(Path.dirname(relayProgram), name))
    if (
      proxyBundle === undefined || relayProgram === undefined || !Fs.existsSync(relayProgram) || volumesProgram === undefined || !Fs.existsSync(volumesProgram) ||
      others.some((program) => !Fs.existsSync(program))
    ) {
      return bad("--deployer bwrap needs ocx2-container-proxy, ocx2-container-proxy-c, ocx2-container-relay, ocx2-container-volumes and ocx2-container-mounts beside this program (npm run build)")
    }
    const spares = option(rest, "spares")
    if (spares !== undefined && !/^\d{1,3}$/.test(spares)) return bad(`--spares takes how many shapes keep a container stood up ahead, 0 to 999: ${spares}`)
    chosen = { _tag: "bwrap", proxyBundle, relayProgram, ...(spares !== undefined ? { spares: Number(spares) } : {}) }
  }
  const hostLayer = assemble({
    root: resolved,
    images,
    store: Path.resolve(option(rest, "store") ?? Path.join(resolved, "store")),
    registries: Path.resolve(option(rest, "registries") ?? Path.join(resolved, "registries.json")),
    deployer: chosen
  })
  const parts = await Effect.runPromise(makeServerParts(resolved).pipe(Effect.provide(hostLayer)))
  parts.volumes.emptyEphemeral()
  const server = await startContainersServer({ root: resolved, parts, host, port })
  process.stdout.write(`listening on ws://${host}:${server.port}\n`)
  const stop = () => {
    void server.close().then(() => process.exit(0))
  }
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
  return undefined
}
