import * as Fs from "node:fs"
import type { ObtainedImage } from "../../../services/ImageSource.js"
import type { Launch } from "../proxy/Launch.js"
import { resolveImageUser } from "./ImageUser.js"

/**
 * What a deploy needs of an image beyond its verified bytes: the unpacked, read-only rootfs and
 * the program its config names. The image source gives them (`rootfs`, `entrypoint`, `cmd`,
 * `env`, `workingDir`); an image without a rootfs cannot be deployed by bubblewrap.
 */
export interface UnpackedImage {
  readonly rootfs: string
  readonly entrypoint: ReadonlyArray<string>
  readonly cmd: ReadonlyArray<string>
  /** `NAME=value` each, as the OCI config's Env */
  readonly env: ReadonlyArray<string>
  /** "" or absent: "/" */
  readonly workingDir: string
  /** the config's User as written; "" or absent: root */
  readonly user?: string
}

/** the label of an image's config that declares the secrets its program takes: a JSON object {name: mode} */
export const secretsLabel = "org.ocx2.secrets"

const declarationOf = (config: Uint8Array): string | Error => {
  let labels: unknown
  try {
    const parsed = JSON.parse(Buffer.from(config).toString("utf8")) as { config?: { Labels?: unknown } }
    labels = parsed.config?.Labels
  } catch {
    return new Error("the image's config is not JSON")
  }
  if (typeof labels !== "object" || labels === null) return "{}"
  const text = (labels as Record<string, unknown>)[secretsLabel]
  if (text === undefined) return "{}"
  try {
    const v = typeof text === "string" ? (JSON.parse(text) as unknown) : undefined
    if (typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v).every((m) => typeof m === "string")) return text as string
  } catch {
    // said below
  }
  return new Error(`the image's label ${secretsLabel} is not a JSON object of {name: mode}`)
}

/** the launch file's content and the rootfs, or why this image cannot be deployed */
export const imageLaunch = (image: ObtainedImage): { readonly rootfs: string; readonly launch: Launch } | string => {
  const u = image as ObtainedImage & Partial<UnpackedImage>
  if (typeof u.rootfs !== "string") return `the image ${image.digest} was given with no unpacked rootfs`
  try {
    if (!Fs.statSync(u.rootfs).isDirectory()) return `the image's rootfs ${u.rootfs} is not a directory`
  } catch (e) {
    return `the image's rootfs ${u.rootfs} cannot be read: ${(e as Error).message}`
  }
  const command = [...(u.entrypoint ?? []), ...(u.cmd ?? [])]
  if (command.length === 0) return `the image ${image.digest} names no Entrypoint and no Cmd: nothing to run`
  const secrets = declarationOf(image.config)
  if (secrets instanceof Error) return secrets.message
  const workingDir = u.workingDir === undefined || u.workingDir === "" ? "/" : u.workingDir
  if (!workingDir.startsWith("/")) return `the image's WorkingDir ${workingDir} is not absolute`
  const user = resolveImageUser(u.rootfs, u.user ?? "")
  if (typeof user === "string") return user
  // root needs nothing of the deployer: the container's root is the sandbox's own
  const runAs = user === undefined || (user.uid === 0 && user.gid === 0) ? {} : { user }
  return { rootfs: u.rootfs, launch: { command, env: u.env ?? [], workingDir, secrets, ...runAs } }
}
