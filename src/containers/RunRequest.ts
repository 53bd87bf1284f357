import { containerComponents, isInside, isVolumeMode, isVolumePath, type VolumeMode } from "./ContainerNames.js"
import { memberText } from "./VerbatimMember.js"

/** A decoded `tools::run` request (docs/containers.md section 4). */
export interface RunRequest {
  readonly image: string
  readonly template: string
  readonly memory: number
  readonly disk: number
  readonly volumeMounts: ReadonlyArray<VolumeMount>
  readonly fuseFileMounts: ReadonlyArray<FuseMount>
  readonly fuseDirectoryMounts: ReadonlyArray<FuseMount>
  /** the exact JSON text of `template` in the request, its quotes and escapes as sent */
  readonly templateText: string
  /** the exact JSON text of `arguments` in the request ("null" when absent) */
  readonly argumentsText: string
}

export interface VolumeMount {
  readonly volumeName: string
  readonly volumeRelativePath: string
  readonly containerPath: string
  readonly mode: VolumeMode
}

export interface FuseMount {
  readonly id: string
  readonly containerPath: string
}

export const runTag = 1

const utf8 = new TextDecoder("utf-8", { fatal: true })

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)
const onlyKeys = (o: Json, allowed: ReadonlyArray<string>) => Object.keys(o).every((k) => allowed.includes(k))
const isSize = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 1
const isContainerPath = (v: unknown): v is string => typeof v === "string" && v.startsWith("/")

/** undefined: the payload does not decode, and is answered by the bare finish */
export const decodeRunRequest = (payload: Buffer): RunRequest | undefined => {
  if (payload[0] !== runTag) return undefined
  let text: string
  let body: unknown
  try {
    text = utf8.decode(payload.subarray(1))
    body = JSON.parse(text)
  } catch {
    return undefined
  }
  if (!isObject(body)) return undefined
  if (!onlyKeys(body, ["image", "template", "memory", "disk", "volume_mounts", "fuse_file_mounts", "fuse_directory_mounts", "arguments"])) {
    return undefined
  }
  const { image, template, memory, disk } = body
  if (typeof image !== "string" || !/^sha256:[0-9a-f]{64}$/.test(image)) return undefined
  if (typeof template !== "string" || !isSize(memory) || !isSize(disk)) return undefined
  const volumeMounts = list(body.volume_mounts, decodeVolumeMount)
  const fuseFileMounts = list(body.fuse_file_mounts, decodeFuseMount)
  const fuseDirectoryMounts = list(body.fuse_directory_mounts, decodeFuseMount)
  if (volumeMounts === undefined || fuseFileMounts === undefined || fuseDirectoryMounts === undefined) return undefined
  return {
    image,
    template,
    memory,
    disk,
    volumeMounts,
    fuseFileMounts,
    fuseDirectoryMounts,
    templateText: memberText(text, "template")!,
    argumentsText: "arguments" in body ? memberText(text, "arguments")! : "null"
  }
}

const list = <A>(value: unknown, decode: (v: unknown) => A | undefined): ReadonlyArray<A> | undefined => {
  if (value === undefined) return []
  if (!Array.isArray(value)) return undefined
  const out: Array<A> = []
  for (const v of value) {
    const a = decode(v)
    if (a === undefined) return undefined
    out.push(a)
  }
  return out
}

const decodeVolumeMount = (v: unknown): VolumeMount | undefined => {
  if (!isObject(v) || !onlyKeys(v, ["volume_name", "volume_relative_path", "container_path", "mode"])) return undefined
  const relative = v.volume_relative_path ?? ""
  if (typeof v.volume_name !== "string" || typeof relative !== "string" || !isVolumePath(relative)) return undefined
  if (!isContainerPath(v.container_path) || !isVolumeMode(v.mode)) return undefined
  return { volumeName: v.volume_name, volumeRelativePath: relative, containerPath: v.container_path, mode: v.mode }
}

const decodeFuseMount = (v: unknown): FuseMount | undefined => {
  if (!isObject(v) || !onlyKeys(v, ["id", "container_path"])) return undefined
  if (typeof v.id !== "string" || v.id === "" || !isContainerPath(v.container_path)) return undefined
  return { id: v.id, containerPath: v.container_path }
}

/**
 * The refusals of the error kind (docs/containers.md section 5), in the seed's order; the
 * message names what is wrong. `listed` is the connection's volumes::list.
 */
export const refusal = (
  request: RunRequest,
  listed: ReadonlySet<string>,
  imageRefused: boolean
): string | undefined => {
  for (const m of request.volumeMounts) {
    if (!listed.has(m.volumeName)) return `volume ${JSON.stringify(m.volumeName)} is not in your volumes::list`
  }
  const paths = [
    ...request.volumeMounts.map((m) => m.containerPath),
    ...request.fuseFileMounts.map((m) => m.containerPath),
    ...request.fuseDirectoryMounts.map((m) => m.containerPath)
  ]
  const pathProblem = mountPathsProblem(paths)
  if (pathProblem !== undefined) return pathProblem
  const ids = new Set<string>()
  for (const m of [...request.fuseFileMounts, ...request.fuseDirectoryMounts]) {
    if (ids.has(m.id)) return `two FUSE mounts have the id ${JSON.stringify(m.id)}`
    ids.add(m.id)
  }
  if (imageRefused) return `this server will not supply the image ${request.image}`
  return undefined
}

/** the mount-path rules, also for a fuse-mount channel's new path beside the existing ones */
export const mountPathsProblem = (paths: ReadonlyArray<string>): string | undefined => {
  for (const p of paths) if (p === "/") return "a mount is at the root of the container"
  const seen = new Set<string>()
  for (const p of paths) {
    if (seen.has(p)) return `two mounts are at ${JSON.stringify(p)}`
    seen.add(p)
  }
  const split: Array<ReadonlyArray<string>> = []
  for (const p of paths) {
    const components = containerComponents(p)
    if (components === undefined) return `the mount path ${JSON.stringify(p)} has a component that is empty, . or ..`
    split.push(components)
  }
  for (let i = 0; i < split.length; i++) {
    for (let j = 0; j < split.length; j++) {
      if (i !== j && isInside(split[i]!, split[j]!)) return `the mount at ${JSON.stringify(paths[i])} is inside the mount at ${JSON.stringify(paths[j])}`
    }
  }
  return undefined
}
