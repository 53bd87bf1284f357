import * as Fs from "node:fs"
import * as Path from "node:path"
import { connect, type ClientImage } from "./Client.js"
import type { FuseHandler } from "./fuse/Handler.js"
import { hostDirectoryHandler, hostFileHandler } from "./fuse/HostHandler.js"
import { tagged } from "./Frames.js"
import { Answer } from "./Wire.js"

/**
 * `ocx2 containers ...`: a person trying a tool-container server from the command line
 * (docs/containers.md, "From the command line"). The server is --server (or
 * OCX2_CONTAINERS_URL), the token is read from --token-file (or OCX2_CONTAINERS_TOKEN).
 * Exit status: 0 done, 1 the run's error or a failure, 2 refused or bad usage.
 */
const usage = `usage:
  ocx2 containers run REPOSITORY@sha256:DIGEST --layout OCI-LAYOUT-DIR [--template ID] [--memory BYTES] [--disk BYTES]
        [--arguments JSON] [--secrets JSON] [--volume NAME:CONTAINER-PATH:MODE[:RELATIVE-PATH]]...
        [--fuse-file ID:CONTAINER-PATH:HOST-FILE]... [--fuse-directory ID:CONTAINER-PATH:HOST-DIRECTORY]...
  ocx2 containers volumes
  ocx2 containers volume-create NAME ephemeral|read_only|persistent
  ocx2 containers version
  ocx2 containers output ID [--stream stdout|stderr]
common options: --server ws://HOST:PORT (or OCX2_CONTAINERS_URL), --token-file FILE (or OCX2_CONTAINERS_TOKEN),
  --dry-run (say what would be sent, and connect to nothing)`

class Usage extends Error {}

interface Parsed {
  readonly positional: Array<string>
  dryRun: boolean
  readonly single: Map<string, string>
  readonly many: Map<string, Array<string>>
}

const repeatable = new Set(["volume", "fuse-file", "fuse-directory"])
const known = new Set(["server", "token-file", "layout", "template", "memory", "disk", "arguments", "secrets", "stream", ...repeatable])

const parse = (args: ReadonlyArray<string>): Parsed => {
  const parsed: Parsed = { positional: [], dryRun: false, single: new Map(), many: new Map() }
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (!arg.startsWith("--")) {
      parsed.positional.push(arg)
      continue
    }
    if (arg === "--dry-run") {
      parsed.dryRun = true
      continue
    }
    const eq = arg.indexOf("=")
    const name = arg.slice(2, eq < 0 ? undefined : eq)
    if (!known.has(name)) throw new Usage(`unknown option --${name}`)
    const value = eq >= 0 ? arg.slice(eq + 1) : args[++i]
    if (value === undefined) throw new Usage(`--${name} needs a value`)
    if (repeatable.has(name)) parsed.many.set(name, [...(parsed.many.get(name) ?? []), value])
    else if (parsed.single.has(name)) throw new Usage(`--${name} is given twice`)
    else parsed.single.set(name, value)
  }
  return parsed
}

const sizeOf = (text: string | undefined, fallback: number, name: string): number => {
  if (text === undefined) return fallback
  const m = /^(\d+)([KMG]i?B?)?$/i.exec(text)
  if (m === null) throw new Usage(`--${name} takes a size in bytes (or with K, M, G): ${JSON.stringify(text)}`)
  const unit = m[2]?.[0]?.toUpperCase()
  const n = Number(m[1]) * (unit === "K" ? 1024 : unit === "M" ? 1024 ** 2 : unit === "G" ? 1024 ** 3 : 1)
  if (!Number.isSafeInteger(n) || n < 1) throw new Usage(`--${name} must be at least 1 byte`)
  return n
}

const jsonOf = (text: string | undefined, name: string): string | undefined => {
  if (text === undefined) return undefined
  try {
    JSON.parse(text)
  } catch {
    throw new Usage(`--${name} is not JSON: ${text}`)
  }
  return text
}

/** an image from an OCI image layout: every blob under blobs/sha256 */
const layoutImage = (dir: string, repository: string, digest: string): ClientImage => {
  const blob = (d: string) => Path.join(dir, "blobs", ...d.split(":"))
  if (!Fs.existsSync(blob(digest))) throw new Usage(`the layout ${dir} has no manifest ${digest}`)
  const blobs = new Map<string, Uint8Array>()
  for (const hex of Fs.readdirSync(Path.join(dir, "blobs", "sha256"))) blobs.set(`sha256:${hex}`, Fs.readFileSync(Path.join(dir, "blobs", "sha256", hex)))
  return { repository, manifest: Fs.readFileSync(blob(digest)), blobs }
}

/** --fuse-file ID:CONTAINER-PATH:HOST-FILE and --fuse-directory ...:HOST-DIRECTORY: the mounts, and the handlers serving the host's file or directory */
const fuseMounts = (values: ReadonlyArray<string> | undefined, kind: "file" | "directory", handlers: Map<string, FuseHandler>) => {
  const name = `fuse-${kind}`
  return (values ?? []).map((v) => {
    const m = /^([^:]+):([^:]+):(.+)$/.exec(v)
    if (m === null) throw new Usage(`--${name} takes ID:CONTAINER-PATH:HOST-${kind.toUpperCase()}: ${JSON.stringify(v)}`)
    const [, id, containerPath, host] = m as unknown as [string, string, string, string]
    let stat: Fs.Stats
    try {
      stat = Fs.statSync(host)
    } catch {
      throw new Usage(`--${name} ${id}: there is no ${host}`)
    }
    if (kind === "file" ? !stat.isFile() : !stat.isDirectory()) throw new Usage(`--${name} ${id}: ${host} is not a ${kind}`)
    if (handlers.has(id)) throw new Usage(`two FUSE mounts have the id ${JSON.stringify(id)}`)
    handlers.set(id, kind === "file" ? hostFileHandler(host) : hostDirectoryHandler(host))
    return { id, container_path: containerPath }
  })
}

export const runContainersCli = async (args: ReadonlyArray<string>): Promise<number> => {
  try {
    return await cli(args)
  } catch (e) {
    if (e instanceof Usage) {
      process.stderr.write(`ocx2 containers: ${e.message}\n${usage}\n`)
      return 2
    }
    process.stderr.write(`ocx2 containers: ${e instanceof Error ? e.message : String(e)}\n`)
    return 1
  }
}

const cli = async (args: ReadonlyArray<string>): Promise<number> => {
  const [command, ...rest] = args
  if (command === undefined || command === "help" || command === "--help") {
    process.stdout.write(usage + "\n")
    return command === undefined ? 2 : 0
  }
  const p = parse(rest)
  const server = p.single.get("server") ?? process.env.OCX2_CONTAINERS_URL
  if (server === undefined) throw new Usage("name the server: --server ws://HOST:PORT or OCX2_CONTAINERS_URL")
  const tokenFile = p.single.get("token-file")
  const token = tokenFile !== undefined ? Fs.readFileSync(tokenFile, "utf8").trim() : process.env.OCX2_CONTAINERS_TOKEN
  if (token === undefined || token === "") throw new Usage("give the token: --token-file FILE or OCX2_CONTAINERS_TOKEN")

  if (command === "version" || command === "volumes" || command === "volume-create") {
    const [name, mode] = p.positional
    if (command === "volume-create" && (name === undefined || mode === undefined)) throw new Usage("volume-create takes NAME and MODE")
    if (p.dryRun) {
      const what = command === "version" ? "ask for its version and capabilities" : command === "volumes" ? "list the volumes of the token's identity" : `create the volume ${name} (${mode})`
      process.stdout.write(`would connect to ${server} with the token and ${what}; nothing was done (a dry run)\n`)
      return 0
    }
    const client = await connect(server, token)
    try {
      if (command === "version") process.stdout.write(JSON.stringify(await client.version()) + "\n")
      else if (command === "volumes") for (const v of await client.volumesList()) process.stdout.write(`${v.name} ${v.mode}\n`)
      else {
        await client.volumesCreate(name!, mode!)
        process.stdout.write(`created ${name} (${mode})\n`)
      }
      return 0
    } finally {
      client.close()
    }
  }
  if (command === "output") {
    const [id] = p.positional
    if (id === undefined) throw new Usage("output takes the container's ID, as run printed it")
    const stream = p.single.get("stream") ?? "stdout"
    if (stream !== "stdout" && stream !== "stderr") throw new Usage(`--stream takes stdout or stderr: ${JSON.stringify(stream)}`)
    if (p.dryRun) {
      process.stdout.write(`would connect to ${server} with the token and read the ${stream} the server kept of the container ${id}; nothing was done (a dry run)\n`)
      return 0
    }
    const client = await connect(server, token)
    try {
      // the bytes as the program wrote them (their last part, as the server keeps it), nothing added
      const bytes = await client.output(id, stream)
      await new Promise<void>((resolve, reject) => process.stdout.write(bytes, (e) => (e ? reject(e) : resolve())))
      return 0
    } finally {
      client.close()
    }
  }
  if (command !== "run") throw new Usage(`unknown command ${JSON.stringify(command)}`)

  const image = p.positional[0]
  const at = image?.lastIndexOf("@") ?? -1
  if (image === undefined || at <= 0 || !/^sha256:[0-9a-f]{64}$/.test(image.slice(at + 1))) throw new Usage("name the image as REPOSITORY@sha256:DIGEST")
  const repository = image.slice(0, at)
  const digest = image.slice(at + 1)
  const layout = p.single.get("layout")
  const images = new Map<string, ClientImage>()
  if (layout !== undefined) images.set(digest, layoutImage(layout, repository, digest))
  const volumeMounts = (p.many.get("volume") ?? []).map((v) => {
    const [name, path, mode, relative] = v.split(":")
    if (name === undefined || path === undefined || mode === undefined) throw new Usage(`--volume takes NAME:CONTAINER-PATH:MODE[:RELATIVE-PATH]: ${JSON.stringify(v)}`)
    return { volume_name: name, container_path: path, mode, volume_relative_path: relative ?? "" }
  })
  const fuse = new Map<string, FuseHandler>()
  const fuseFileMounts = fuseMounts(p.many.get("fuse-file"), "file", fuse)
  const fuseDirectoryMounts = fuseMounts(p.many.get("fuse-directory"), "directory", fuse)
  const argumentsText = jsonOf(p.single.get("arguments"), "arguments")
  const secrets = jsonOf(p.single.get("secrets"), "secrets")
  const body = JSON.stringify({
    image: digest,
    template: p.single.get("template") ?? "default",
    memory: sizeOf(p.single.get("memory"), 256 * 1024 ** 2, "memory"),
    disk: sizeOf(p.single.get("disk"), 1024 ** 3, "disk"),
    volume_mounts: volumeMounts,
    fuse_file_mounts: fuseFileMounts,
    fuse_directory_mounts: fuseDirectoryMounts
  })
  // the arguments as the person wrote them, byte for byte
  const request = argumentsText === undefined ? body : `${body.slice(0, -1)},"arguments":${argumentsText}}`
  if (p.dryRun) {
    process.stdout.write(
      `would connect to ${server} with the token and run the tool container ${image}: the request ${request}; ` +
        `${layout !== undefined ? `the image's blobs from ${layout} as the server asks for them` : "no image to give the server (it must have it)"}; ` +
        `${secrets !== undefined ? "the secrets given (not shown) fed when the container registers" : "no secrets fed"}; nothing was done (a dry run)\n`
    )
    return 0
  }

  let failed = false
  const client = await connect(server, token)
  const run = client.run(request, {
    onLater: (p) => {
      if (p[0] === Answer.active) process.stdout.write("active\n")
      else if (p[0] === Answer.inactive) process.stdout.write(`inactive ${p.subarray(1).toString("utf8")}\n`)
      else if (p[0] === Answer.error) {
        failed = true
        process.stderr.write(`ocx2 containers: the container: ${p.subarray(1).toString("utf8")}\n`)
      }
    },
    images,
    registration: () => (secrets !== undefined ? [tagged(Answer.deploy, secrets)] : [tagged(Answer.registered)]),
    fuse,
    onAsk: (channel) => {
      process.stdout.write(`ask ${channel.request[0]} ${channel.request.subarray(1).toString("base64")} (answered with nothing)\n`)
      channel.finish()
    }
  })
  const stop = () => void run.stop()
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
  try {
    const first = await run.first
    if (first.kind === "bare") {
      process.stderr.write("ocx2 containers: the server could not decode the request\n")
      return 2
    }
    if (first.kind === "refusal") {
      process.stderr.write(`ocx2 containers: refused (${first.byte}) for the volume ${first.name}${first.mode !== undefined ? `, which is ${first.mode}` : ""}\n`)
      return 2
    }
    if (first.kind === "error") {
      process.stderr.write(`ocx2 containers: ${first.message}\n`)
      return 1
    }
    if (first.kind === "other") return 1
    process.stdout.write(`id ${first.id}\n`)
    await run.finished
    process.stdout.write("ended\n")
    return failed ? 1 : 0
  } finally {
    process.removeListener("SIGINT", stop)
    process.removeListener("SIGTERM", stop)
    client.close()
  }
}
