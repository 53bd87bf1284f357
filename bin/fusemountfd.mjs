// Builds dist/fusemountfd, the static C helper that makes a FUSE mount for
// src/containers/fuse/Mount.ts, from src/containers/fuse/fusemountfd.c: `gcc -static`, so it
// runs in any amd64 image, libc or none. Run by bin/build.mjs; `node bin/fusemountfd.mjs` alone
// builds it too. Rebuilt only when the source is newer than the binary.
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"

const project = Path.resolve(import.meta.dirname, "..")

export const buildFuseMountFd = (dist = Path.join(project, "dist")) => {
  const source = Path.join(project, "src", "containers", "fuse", "fusemountfd.c")
  const binary = Path.join(dist, "fusemountfd")
  if (Fs.existsSync(binary) && Fs.statSync(binary).mtimeMs >= Fs.statSync(source).mtimeMs) return binary
  Fs.mkdirSync(dist, { recursive: true })
  const temporary = `${binary}.${process.pid}.partial`
  try {
    execFileSync("gcc", ["-static", "-Os", "-s", "-o", temporary, source], { stdio: ["ignore", "inherit", "inherit"] })
  } catch (e) {
    Fs.rmSync(temporary, { force: true })
    throw new Error(`fusemountfd: gcc -static failed (install gcc and libc6-dev): ${e instanceof Error ? e.message : e}`)
  }
  Fs.renameSync(temporary, binary)
  return binary
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) buildFuseMountFd()
