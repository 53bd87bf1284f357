// Builds the project's static C programs into dist/: fusemountfd, the helper that makes a FUSE
// mount for src/containers/fuse/Mount.ts (from src/containers/fuse/fusemountfd.c), and
// ocx2-container-relay, the relay to a container's proxy (src/containers/deploy/relay.c), and
// ocx2-container-volumes, which binds a taken spare's volumes (src/containers/deploy/volumes.c), and
// ocx2-container-proxy-c, the proxy every container starts (src/containers/proxy/proxy.c), and
// ocx2-container-mounts, which mounts a container's disk and overlay (src/containers/deploy/mounts.c);
// and ocx2-flock.node, the addon that gives the node's programs flock(2) (src/care/flock.c).
// `gcc -static`, so fusemountfd runs in any amd64 image, libc or none; the addon is a shared
// object Node loads, written against Node-API's stable ABI, so gcc alone builds it. Run by bin/build.mjs;
// `node bin/fusemountfd.mjs` alone builds them too. Each rebuilt only when its source is newer
// than its binary.
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"

const project = Path.resolve(import.meta.dirname, "..")

const buildStatic = (source, binary, flags = ["-static", "-Os", "-s"]) => {
  if (Fs.existsSync(binary) && Fs.statSync(binary).mtimeMs >= Fs.statSync(source).mtimeMs) return binary
  Fs.mkdirSync(Path.dirname(binary), { recursive: true })
  const temporary = `${binary}.${process.pid}.partial`
  try {
    execFileSync("gcc", [...flags, "-o", temporary, source], { stdio: ["ignore", "inherit", "inherit"] })
  } catch (e) {
    Fs.rmSync(temporary, { force: true })
    throw new Error(`${Path.basename(binary)}: gcc -static failed (install gcc and libc6-dev): ${e instanceof Error ? e.message : e}`)
  }
  Fs.renameSync(temporary, binary)
  return binary
}

export const buildFuseMountFd = (dist = Path.join(project, "dist")) =>
  buildStatic(Path.join(project, "src", "containers", "fuse", "fusemountfd.c"), Path.join(dist, "fusemountfd"))

export const buildContainerRelay = (dist = Path.join(project, "dist")) =>
  buildStatic(Path.join(project, "src", "containers", "deploy", "relay.c"), Path.join(dist, "ocx2-container-relay"))

export const buildContainerVolumes = (dist = Path.join(project, "dist")) =>
  buildStatic(Path.join(project, "src", "containers", "deploy", "volumes.c"), Path.join(dist, "ocx2-container-volumes"))

export const buildContainerProxy = (dist = Path.join(project, "dist")) =>
  buildStatic(Path.join(project, "src", "containers", "proxy", "proxy.c"), Path.join(dist, "ocx2-container-proxy-c"))

export const buildContainerMounts = (dist = Path.join(project, "dist")) =>
  buildStatic(Path.join(project, "src", "containers", "deploy", "mounts.c"), Path.join(dist, "ocx2-container-mounts"))

export const buildFlockAddon = (dist = Path.join(project, "dist")) =>
  buildStatic(Path.join(project, "src", "care", "flock.c"), Path.join(dist, "ocx2-flock.node"), ["-shared", "-fPIC", "-O2", "-s"])

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  buildFuseMountFd()
  buildContainerRelay()
  buildContainerVolumes()
  buildContainerProxy()
  buildContainerMounts()
  buildFlockAddon()
}
