/**
 * Host paths a sandbox is given: each resolved (links followed) before it is trusted,
 * checked against OCX's own paths (refusal 7), and turned into bind mounts in 2.8's
 * table order; and, where /usr is bound, the host's top-level links into it (a merged /usr).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { SandboxPathRefused, InvalidLaunchSpec, type SandboxSpec } from "../../services/SandboxLauncher.js"
import type { Link, Mount } from "./BwrapArgs.js"

/** `p` is `dir` or lies within it (both absolute and normalized) */
export const isWithin = (p: string, dir: string): boolean =>
  p === dir || dir === "/" || p.startsWith(dir.endsWith("/") ? dir : `${dir}/`)

/** realpath of the longest existing prefix, the rest joined as written (for paths not made yet) */
export const resolveLoose = (p: string): string => {
  const abs = Path.resolve(p)
  let head = abs
  const rest: Array<string> = []
  for (;;) {
    try {
      return Path.join(Fs.realpathSync.native(head), ...rest.reverse())
    } catch {
      if (head === "/") return abs
      rest.push(Path.basename(head))
      head = Path.dirname(head)
    }
  }
}

type Kind = "read_only" | "read_write" | "homes"

/** host paths no sandbox may see: /proc shows the host's processes */
const neverShown = ["/proc"]

const refuse = (path: string, resolved: string, reason: string) => new SandboxPathRefused({ path, resolved, reason })

const resolveGiven = (key: string, given: string): string | InvalidLaunchSpec | SandboxPathRefused => {
  if (!Path.isAbsolute(given)) return new InvalidLaunchSpec({ key, reason: `${JSON.stringify(given)} is not an absolute path` })
  try {
    return Fs.realpathSync.native(given)
  } catch (e) {
    return refuse(given, given, `it does not exist on this host (${(e as NodeJS.ErrnoException).code ?? String(e)})`)
  }
}

/**
 * Refusal 7: a path that, once links are followed, is, holds or lies within one of
 * OCX's own paths; but the workspace may be named anywhere, and the release
 * directory (and what lies within it) in read_only alone.
 */
export const checkPath = (
  kind: Kind,
  given: string,
  resolved: string,
  context: { readonly own: ReadonlyArray<string>; readonly workspace: string | undefined; readonly release: string | undefined }
): SandboxPathRefused | undefined => {
  for (const n of neverShown) {
    if (isWithin(resolved, n) || isWithin(n, resolved)) return refuse(given, resolved, `it is, holds or lies within the host's ${n}`)
  }
  if (context.workspace !== undefined && isWithin(resolved, context.workspace)) return undefined
  // $$release$$, read-only, shows the served release's programs and nothing more: what lies within
  // it holds nothing but the release (ROOT/ocx2-hook and ROOT/current lead into it, and are it)
  if (kind === "read_only" && context.release !== undefined && isWithin(resolved, context.release)) return undefined
  for (const own of context.own) {
    if (resolved === own) return refuse(given, resolved, `it is OCX's own ${own}`)
    if (isWithin(own, resolved)) return refuse(given, resolved, `it holds OCX's own ${own}`)
    if (isWithin(resolved, own)) return refuse(given, resolved, `it lies within OCX's own ${own}`)
  }
  return undefined
}

/** a top-level entry of the host's root directory that is a link, and the link's text as written */
export interface RootLink {
  readonly name: string
  readonly target: string
}

/** the links among the entries of the host's root directory (`root` is "/" but for tests) */
export const readRootLinks = (root = "/"): ReadonlyArray<RootLink> => {
  const out: Array<RootLink> = []
  let names: Array<string>
  try {
    names = Fs.readdirSync(root)
  } catch {
    return out
  }
  for (const name of names) {
    try {
      if (Fs.lstatSync(Path.join(root, name)).isSymbolicLink()) out.push({ name, target: Fs.readlinkSync(Path.join(root, name)) })
    } catch {
      // gone meanwhile
    }
  }
  return out
}

/**
 * A merged /usr (Debian 12 and every current distribution: /bin, /sbin, /lib, /lib64 are
 * links into /usr): where the sandbox binds /usr itself (`bound` holds "/usr"), it gets each
 * of the host's top-level links whose text, read from "/", names a place within /usr, with
 * that same text, as Flatpak does. A link is left out where the sandbox puts anything of its
 * own (`taken`: bound paths, proc, dev, tmp, created files) at that name or within it. Pure.
 */
export const usrLinks = (
  bound: ReadonlyArray<string>,
  taken: ReadonlyArray<string>,
  rootLinks: ReadonlyArray<RootLink>
): ReadonlyArray<Link> => {
  if (!bound.includes("/usr")) return []
  const out: Array<Link> = []
  for (const l of rootLinks) {
    if (l.name === "" || l.name === "." || l.name === ".." || l.name.includes("/")) continue
    if (l.name === "usr" || !isWithin(Path.posix.resolve("/", l.target), "/usr")) continue
    const at = `/${l.name}`
    if (taken.some((p) => isWithin(p, at) || isWithin(at, p))) continue
    out.push({ target: l.target, at })
  }
  return out
}

export interface PlannedMounts {
  readonly mounts: ReadonlyArray<Mount>
  /** the host's links into /usr, made in the sandbox after the mounts (usrLinks) */
  readonly links: ReadonlyArray<Link>
  readonly workspace: string | undefined
}

/**
 * every host path resolved and checked, as mounts: the workspace, then table order (read_only,
 * read_write, homes); then the links of a merged /usr, from `rootLinks` (the host's, but for tests)
 */
export const planMounts = (
  sb: SandboxSpec,
  rootLinks: ReadonlyArray<RootLink> = readRootLinks()
): PlannedMounts | SandboxPathRefused | InvalidLaunchSpec => {
  const own = sb.ownPaths.map(resolveLoose)
  let workspace: string | undefined
  let workspaceDest: string | undefined
  if (sb.workspace !== undefined) {
    const r = resolveGiven("sandbox.workspace", sb.workspace)
    if (typeof r !== "string") return r
    if (!Fs.statSync(r).isDirectory()) return new InvalidLaunchSpec({ key: "sandbox.workspace", reason: `${sb.workspace} is not a directory` })
    workspace = r
    workspaceDest = Path.resolve(sb.workspace)
  }
  const release = sb.release === undefined ? undefined : resolveLoose(sb.release)
  const context = { own, workspace, release }

  const resolveAll = (kind: Kind, list: ReadonlyArray<string>) => {
    const out: Array<{ given: string; resolved: string }> = []
    for (const given of list) {
      const r = resolveGiven(`sandbox.${kind}`, given)
      if (typeof r !== "string") return r
      const refused = checkPath(kind, given, r, context)
      if (refused !== undefined) return refused
      out.push({ given, resolved: r })
    }
    return out
  }
  const rw = resolveAll("read_write", sb.readWrite)
  if (!Array.isArray(rw)) return rw
  // a path in both lists is read-write
  const roAll = resolveAll("read_only", sb.readOnly.filter((p) => !sb.readWrite.includes(p)))
  if (!Array.isArray(roAll)) return roAll
  const rwResolved = new Set(rw.map((x) => x.resolved))
  const ro = roAll.filter((x) => !rwResolved.has(x.resolved))
  const homes = resolveAll("homes", sb.homes)
  if (!Array.isArray(homes)) return homes
  if (homes.length > 0 && workspaceDest === undefined) {
    return new InvalidLaunchSpec({ key: "sandbox.homes", reason: "homes are seen inside the workspace, and there is none" })
  }

  // the workspace first, as the base the keys are applied over: a read_only path inside it stays read-only
  const mounts: Array<Mount> = []
  if (workspace !== undefined) mounts.push({ mode: "rw", source: workspace, dest: workspaceDest! })
  for (const x of ro) mounts.push({ mode: "ro", source: x.resolved, dest: Path.resolve(x.given) })
  for (const x of rw) mounts.push({ mode: "rw", source: x.resolved, dest: Path.resolve(x.given) })
  for (const x of homes) {
    const base = Path.basename(Path.resolve(x.given))
    if (base === "") return new InvalidLaunchSpec({ key: "sandbox.homes", reason: `${x.given} has no base name` })
    mounts.push({ mode: "rw", source: x.resolved, dest: Path.join(workspaceDest!, base) })
  }
  const bound = mounts.map((m) => m.dest)
  const taken = [...bound, sb.proc, sb.dev, sb.tmp, ...sb.createdFiles.map((f) => f.at)].map((p) => Path.posix.resolve("/", p))
  return { mounts, links: usrLinks(bound, taken, rootLinks), workspace }
}
