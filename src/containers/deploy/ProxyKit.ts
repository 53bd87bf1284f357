import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

/**
 * The proxy kit: what every container gets read-only at /.proxy. The proxy itself is a static C
 * program (src/containers/proxy/proxy.c, built as ocx2-container-proxy-c beside the bundles): it
 * starts in about a millisecond and holds a few hundred KiB, where the Node proxy it replaced took
 * about 60 ms and 46 MiB resident in every container (docs/architecture.md). Its FUSE side is
 * Node, started only in a container whose run asks for a FUSE mount: so the kit still carries the
 * host's Node, each shared library `ldd` lists for it, its loader, and the bundled FUSE side with
 * the static FUSE mount helper beside it (fusemountfd, where the FUSE module looks for it), started
 * through the loader with an explicit library path (nothing of the image's /lib is used); the C
 * proxy is given that command as its arguments. Built once per Node and proxy into
 * ROOT/proxy-kit/KEY and bound, never copied, into each container. Empty files in it are the mount
 * points of the files bound per container.
 *
 * The FUSE side's start is on the path from a mount's request to its answer, and compiling its
 * bundle is much of it: it is built as a CommonJS bundle run through V8's code cache
 * (bin/build.mjs), and the kit carries the cache, made when the kit is built by starting the FUSE
 * side once the way the C proxy does (a sandbox whose root is empty but the kit, writable this
 * once). Without the C proxy's socket it stops once its code is loaded, and leaves the cache of
 * all it compiled beside its bundle.
 */
export interface ProxyKit {
  readonly dir: string
  /** the command that starts the proxy inside the container: the C proxy, given its FUSE side's command */
  readonly command: ReadonlyArray<string>
}

export const kitMount = "/.proxy"

/** where a spare has its staging mount, whose later mounts on the host side appear inside (deploy/volumes.c) */
export const volumesMount = `${kitMount}/volumes`

/** what the kit holds besides its files, in its key: a kit of an earlier layout is built again */
const layout = "mount points: launch.json memory-events volumes/; the C proxy"

/** the libraries ldd lists (`NAME => PATH`) and the loader (the line that is only a path) */
export const parseLdd = (text: string): { readonly libraries: ReadonlyArray<{ name: string; path: string }>; readonly loader: string | undefined } => {
  const libraries: Array<{ name: string; path: string }> = []
  let loader: string | undefined
  for (const raw of text.split("\n")) {
    const line = raw.trim()
    const linked = /^(\S+) => (\/\S+) \(0x[0-9a-f]+\)$/.exec(line)
    if (linked !== null) libraries.push({ name: linked[1]!, path: linked[2]! })
    else {
      const only = /^(\/\S+) \(0x[0-9a-f]+\)$/.exec(line)
      if (only !== null) loader = only[1]!
    }
  }
  return { libraries, loader }
}

const place = (from: string, to: string) => {
  const real = Fs.realpathSync(from)
  try {
    Fs.linkSync(real, to)
  } catch {
    Fs.copyFileSync(real, to)
  }
}

/** the CommonJS bundle a cached program's loader runs (bin/build.mjs), when it was built so */
const codeOf = (bundle: string): string | undefined => {
  const code = `${bundle.endsWith(".mjs") ? bundle.slice(0, -".mjs".length) : bundle}.cjs`
  return Fs.existsSync(code) ? code : undefined
}

/** starts the kit's FUSE side once in a sandbox with the kit writable: its loader writes the code cache */
const warmCodeCache = (kit: string, command: ReadonlyArray<string>, bwrap: string) => {
  ChildProcess.spawnSync(bwrap, [
    "--unshare-user", "--uid", "0", "--gid", "0", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
    "--die-with-parent", "--clearenv", "--tmpfs", "/", "--bind", kit, kitMount, "--proc", "/proc", "--dev", "/dev",
    "--", ...command
  ], { stdio: "ignore", env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" }, cwd: "/" })
}

/** the static C proxy's name beside the bundles (dist/, a release's programs) and in the kit */
export const cProxyName = "ocx2-container-proxy-c"

/** the kit for this Node, proxy and FUSE side bundle under ROOT, built when missing; throws with what failed */
export const proxyKit = (root: string, proxyBundle: string, node: string = process.execPath, bwrap = "bwrap"): ProxyKit => {
  const realNode = Fs.realpathSync(node)
  const stat = Fs.statSync(realNode)
  // built beside the proxy's bundle (dist/, a release's programs); without it a FUSE mount is refused
  const fuseHelper = Path.join(Path.dirname(proxyBundle), "fusemountfd")
  const hasFuseHelper = Fs.existsSync(fuseHelper)
  const cProxy = Path.join(Path.dirname(proxyBundle), cProxyName)
  if (!Fs.existsSync(cProxy)) throw new Error(`the container proxy ${cProxy} is missing beside ${proxyBundle} (npm run build makes it)`)
  const key = Crypto.createHash("sha256")
    .update(`${layout}\0${realNode}\0${stat.size}\0${stat.mtimeMs}\0`)
    .update(Fs.readFileSync(proxyBundle))
    .update(codeOf(proxyBundle) === undefined ? Buffer.alloc(0) : Fs.readFileSync(codeOf(proxyBundle)!))
    .update(hasFuseHelper ? Fs.readFileSync(fuseHelper) : Buffer.alloc(0))
    .update(Fs.readFileSync(cProxy))
    .digest("hex")
    .slice(0, 24)
  const kits = Path.join(root, "proxy-kit")
  const dir = Path.join(kits, key)
  const ldd = ChildProcess.spawnSync("ldd", [realNode], { encoding: "utf8" })
  if (ldd.status !== 0) throw new Error(`ldd ${realNode} failed: ${ldd.stderr.trim()}`)
  const { libraries, loader } = parseLdd(ldd.stdout)
  if (loader === undefined) throw new Error(`ldd ${realNode} names no loader: is it a static program?`)
  const fuseSide = [`${kitMount}/lib/${Path.basename(loader)}`, "--library-path", `${kitMount}/lib`, `${kitMount}/node`, `${kitMount}/proxy.mjs`]
  const command = [`${kitMount}/${cProxyName}`, ...fuseSide]
  if (Fs.existsSync(Path.join(dir, "complete"))) return { dir, command }
  Fs.mkdirSync(kits, { recursive: true })
  const building = Fs.mkdtempSync(Path.join(kits, ".building-"))
  try {
    Fs.mkdirSync(Path.join(building, "lib"))
    place(realNode, Path.join(building, "node"))
    for (const l of libraries) place(l.path, Path.join(building, "lib", l.name))
    place(loader, Path.join(building, "lib", Path.basename(loader)))
    Fs.copyFileSync(proxyBundle, Path.join(building, "proxy.mjs"))
    const code = codeOf(proxyBundle)
    if (code !== undefined) Fs.copyFileSync(code, Path.join(building, "proxy.cjs"))
    if (hasFuseHelper) Fs.copyFileSync(fuseHelper, Path.join(building, "fusemountfd"))
    Fs.copyFileSync(cProxy, Path.join(building, cProxyName))
    // mount points of what each container is given on its own
    Fs.writeFileSync(Path.join(building, "launch.json"), "")
    Fs.writeFileSync(Path.join(building, "memory-events"), "")
    Fs.mkdirSync(Path.join(building, "volumes"))
    Fs.chmodSync(building, 0o755)
    if (code !== undefined) warmCodeCache(building, fuseSide, bwrap)
    Fs.writeFileSync(Path.join(building, "complete"), "")
    try {
      Fs.renameSync(building, dir)
    } catch (e) {
      // built meanwhile by another
      if (!Fs.existsSync(Path.join(dir, "complete"))) throw e
      Fs.rmSync(building, { recursive: true, force: true })
    }
  } catch (e) {
    Fs.rmSync(building, { recursive: true, force: true })
    throw e
  }
  // kits of an earlier Node or proxy: a container still running one keeps its files through its bind
  for (const other of Fs.readdirSync(kits)) if (other !== key) Fs.rmSync(Path.join(kits, other), { recursive: true, force: true })
  return { dir, command }
}
