// The release root on the local file system, and the checkout's own programs run as child
// processes. Links are relative (staged/NAME), so a root can be moved or bound elsewhere.

import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import {
  type Checkin,
  CheckoutUnfit,
  type CopyPlan,
  NotACheckout,
  ReleaseRoot,
  ReleaseRootError,
  type ReleaseRootService,
  type ReleaseState,
  RootBusy,
  type ServedRelease,
  StepFailed
} from "../services/ReleaseRoot.js"
import { flockNow } from "../src/care/FlockNow.js"
import { releaseOfLinkTarget, releaseOfProgram, releasePaths, type ServedLink } from "../src/release/ReleasePaths.js"
import {
  externalsOfBuild,
  keepInRelease,
  type PackageManifest,
  resolutionCandidates,
  runtimeClosure
} from "../src/release/RuntimeModules.js"
import { checkSmokeAnswer, smokeArguments } from "../src/release/SmokeAnswer.js"
import { namingNode, thisNode } from "../src/release/StagedNode.js"

const reasonOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const io = <A>(path: string, f: () => A): Effect.Effect<A, ReleaseRootError> =>
  Effect.try({ try: f, catch: (cause) => new ReleaseRootError({ path, reason: reasonOf(cause) }) })

const readLink = (path: string): string | undefined => {
  try {
    return Fs.readlinkSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw error
  }
}

const isDirectory = (path: string): boolean => {
  try {
    return Fs.statSync(path).isDirectory()
  } catch {
    return false
  }
}

/** Runs a program to its end, its output left where `stdio` says; resolves with its exit. */
const runProcess = (
  command: string,
  args: ReadonlyArray<string>,
  options: ChildProcess.SpawnOptions & { readonly timeoutMs?: number },
  collect?: (chunk: Buffer) => void
): Effect.Effect<{ code: number | null; signal: string | null; timedOut: boolean }, ReleaseRootError> =>
  Effect.async((resume) => {
    let child: ChildProcess.ChildProcess
    try {
      // its own process group, so an interrupted stage ends the whole step (npm, tsc, vitest)
      child = ChildProcess.spawn(command, [...args], { ...options, detached: true })
    } catch (cause) {
      resume(Effect.fail(new ReleaseRootError({ path: command, reason: reasonOf(cause) })))
      return
    }
    let timedOut = false
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
    const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => {
      timedOut = true
      killGroup()
    }, options.timeoutMs)
    if (collect) {
      child.stdout?.on("data", collect)
      child.stderr?.on("data", collect)
    }
    child.on("error", (cause) => {
      if (timer) clearTimeout(timer)
      resume(Effect.fail(new ReleaseRootError({ path: command, reason: reasonOf(cause) })))
    })
    child.on("close", (code, signal) => {
      if (timer) clearTimeout(timer)
      resume(Effect.succeed({ code, signal, timedOut }))
    })
    return Effect.sync(() => {
      if (timer) clearTimeout(timer)
      killGroup()
    })
  })

const outputOf = (command: string, args: ReadonlyArray<string>, cwd: string): { code: number | null; stdout: string } => {
  const result = ChildProcess.spawnSync(command, [...args], {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
    env: { ...process.env, USER: process.env.USER ?? "root" },
    timeout: 30_000
  })
  return { code: result.status, stdout: result.stdout ?? "" }
}

const gitCheckin = (checkout: string): Checkin | undefined => {
  const head = outputOf("git", ["rev-parse", "--verify", "HEAD"], checkout)
  const top = outputOf("git", ["rev-parse", "--show-toplevel"], checkout)
  if (head.code !== 0 || top.code !== 0 || !/^[0-9a-f]{40,64}$/.test(head.stdout.trim())) return undefined
  const status = outputOf("git", ["status", "--porcelain"], checkout)
  return { vcs: "git", top: top.stdout.trim(), hash: head.stdout.trim(), modified: status.stdout.trim().length > 0 }
}

const fossilCheckin = (checkout: string): Checkin | undefined => {
  const info = outputOf("fossil", ["info"], checkout)
  if (info.code !== 0) return undefined
  const hash = /^checkout:\s+([0-9a-f]{40,64})\b/m.exec(info.stdout)?.[1]
  const top = /^local-root:\s+(.+?)\/?\s*$/m.exec(info.stdout)?.[1]
  if (hash === undefined || top === undefined) return undefined
  const changes = outputOf("fossil", ["changes"], checkout)
  return { vcs: "fossil", top, hash, modified: changes.stdout.trim().length > 0 }
}

const readManifest = (file: string): PackageManifest & { readonly scripts?: Readonly<Record<string, string>> } =>
  JSON.parse(Fs.readFileSync(file, "utf8"))

const planCopyOf = (checkout: string): CopyPlan | CheckoutUnfit => {
  let manifest: PackageManifest
  try {
    manifest = readManifest(Path.join(checkout, "package.json"))
  } catch (cause) {
    return new CheckoutUnfit({ path: checkout, reason: `its package.json cannot be read (${reasonOf(cause)})` })
  }
  for (const script of ["gate", "build"]) {
    if (typeof manifest.scripts?.[script] !== "string") {
      return new CheckoutUnfit({ path: checkout, reason: `its package.json has no "${script}" script` })
    }
  }
  const externals = externalsOfBuild(manifest.scripts!.build!)
  const closure = runtimeClosure(externals, {
    resolve: (from, name) =>
      resolutionCandidates(from, name).find((dir) => Fs.existsSync(Path.join(checkout, dir, "package.json"))),
    manifest: (dir) => readManifest(Path.join(checkout, dir, "package.json")),
    isNative: (dir) => Fs.existsSync(Path.join(checkout, dir, "binding.gyp"))
  })
  if (Either.isLeft(closure)) {
    return new CheckoutUnfit({
      path: checkout,
      reason: `its node_modules has no ${closure.left.name}, which ${closure.left.neededBy} needs at run time (run npm ci there)`
    })
  }
  return { externals, packages: closure.right }
}

/** Opens a log for a step, writes its heading, and returns the descriptor the step writes into. */
const openLog = (log: string, heading: string): number => {
  Fs.mkdirSync(Path.dirname(log), { recursive: true })
  const fd = Fs.openSync(log, "w", 0o644)
  Fs.writeSync(fd, `${heading}\n`)
  return fd
}

const appendLog = (log: string, line: string) => {
  try {
    Fs.appendFileSync(log, `${line}\n`)
  } catch {
    // the log is a courtesy; the step's own outcome is what is reported
  }
}

const endedHow = (exit: { code: number | null; signal: string | null; timedOut: boolean }, timeout: string) =>
  exit.timedOut ? `it did not end within ${timeout}` : exit.signal !== null ? `killed by ${exit.signal}` : `exit status ${exit.code}`

const smokeTimeoutMs = 60_000

/** The release a program is, from its real path (every link followed); undefined when it has none. */
const programReleaseOf = (programPath: string | undefined) => {
  if (programPath === undefined) return undefined
  try {
    return releaseOfProgram(Fs.realpathSync(programPath))
  } catch {
    return undefined
  }
}

const make: ReleaseRootService = {
  resolveRoot: (root) =>
    Effect.gen(function*() {
      const real = yield* io(root, () => Fs.realpathSync(Path.resolve(root)))
      if (!isDirectory(real)) return yield* new ReleaseRootError({ path: root, reason: "not a directory" })
      return real
    }).pipe(Effect.mapError((e) => (e.reason.startsWith("ENOENT") ? new ReleaseRootError({ path: root, reason: "no such directory" }) : e))),

  rootOfProgram: (programPath) => Effect.sync(() => programReleaseOf(programPath)?.root),

  releaseOfProgram: (programPath) => Effect.sync(() => programReleaseOf(programPath)),

  read: (root) =>
    io(root, () => {
      const paths = releasePaths(root)
      const served = (link: ServedLink): ServedRelease | undefined => {
        const target = readLink(paths.link(link))
        if (target === undefined) return undefined
        const name = releaseOfLinkTarget(root, target)
        if (name === undefined) throw new Error(`${paths.link(link)} links to ${target}, which is no release staged in ${paths.staged}`)
        return { name, present: isDirectory(paths.release(name)) }
      }
      const next = served("next")
      const current = served("current")
      const previous = served("previous")
      const hookLink = readLink(paths.hook)
      const state: ReleaseState = {
        root,
        ...(next ? { next } : {}),
        ...(current ? { current } : {}),
        ...(previous ? { previous } : {}),
        ...(hookLink !== undefined ? { hookLink } : {})
      }
      return state
    }),

  hasProgram: (root, name, program) => Effect.sync(() => Fs.existsSync(Path.join(releasePaths(root).release(name), program))),

  switchLink: (root, link, target) =>
    io(Path.join(root, link), () => {
      const path = Path.join(root, link)
      const temporary = Path.join(root, `.${link}.${process.pid}.${Date.now()}`)
      Fs.symlinkSync(target, temporary)
      try {
        Fs.renameSync(temporary, path) // rename(2) replaces the old link in one step
      } catch (error) {
        Fs.rmSync(temporary, { force: true })
        throw error
      }
    }),

  lock: (root) =>
    Effect.acquireRelease(
      Effect.gen(function*() {
        const file = releasePaths(root).lock
        const fd = yield* io(file, () => {
          Fs.mkdirSync(Path.dirname(file), { recursive: true })
          return Fs.openSync(file, Fs.constants.O_RDWR | Fs.constants.O_CREAT, 0o644)
        })
        const status = flockNow(fd)
        if (status === "held") return fd
        Fs.closeSync(fd)
        return yield* status === "busy" ? new RootBusy({ lock: file }) : new ReleaseRootError({ path: file, reason: status })
      }),
      (fd) => Effect.sync(() => Fs.closeSync(fd))
    ).pipe(Effect.asVoid),

  checkinOf: (checkout) =>
    Effect.gen(function*() {
      if (!isDirectory(checkout)) return yield* new NotACheckout({ path: checkout })
      const checkin = gitCheckin(checkout) ?? fossilCheckin(checkout)
      if (checkin === undefined) return yield* new NotACheckout({ path: checkout })
      return checkin
    }),

  planCopy: (checkout) =>
    Effect.suspend(() => {
      const plan = planCopyOf(checkout)
      return plan instanceof CheckoutUnfit ? Effect.fail(plan) : Effect.succeed(plan)
    }),

  runScript: (checkout, script, log, output) =>
    Effect.gen(function*() {
      const started = Date.now()
      const fd = yield* io(log, () => openLog(log, `$ npm run -s ${script}   (in ${checkout}, ${new Date(started).toISOString()})`))
      // without a watcher the child holds its own copy of the descriptor and the log grows as it
      // writes; with one its output comes through a pipe, written into the log and handed on
      // chunk by chunk, as it comes
      const tee = output === undefined ? undefined : (chunk: Buffer) => {
        try {
          Fs.writeSync(fd, chunk)
        } catch {
          // the log is a courtesy, as appendLog's
        }
        output(chunk.toString("utf8"))
      }
      const exit = yield* runProcess(
        "npm",
        ["run", "-s", script],
        { cwd: checkout, stdio: tee === undefined ? ["ignore", fd, fd] : ["ignore", "pipe", "pipe"] },
        tee
      ).pipe(Effect.ensuring(Effect.sync(() => Fs.closeSync(fd))))
      const seconds = ((Date.now() - started) / 1000).toFixed(1)
      appendLog(log, `\n${script} ended: ${endedHow(exit, "")} after ${seconds} s`)
      if (exit.code !== 0) return yield* new StepFailed({ step: script, log, reason: endedHow(exit, "") })
    }),

  assemble: (checkout, plan, into, release) =>
    Effect.gen(function*() {
      const dist = Path.join(checkout, "dist")
      const bundles = yield* io(dist, () =>
        Fs.existsSync(dist) ? Fs.readdirSync(dist).filter((f) => f.endsWith(".mjs")).sort() : [])
      if (!bundles.includes("ocx2.mjs")) {
        return yield* new StepFailed({ step: "build", log: release.buildLog, reason: `it left no ${Path.join(dist, "ocx2.mjs")}` })
      }
      return yield* io(into, () => {
        Fs.rmSync(into, { recursive: true, force: true })
        Fs.mkdirSync(into, { recursive: true })
        const programs = bundles.map((bundle) => {
          const program = bundle.slice(0, -".mjs".length)
          // the program names the Node that stages (and smokes) it: Fossil runs an extension's
          // program with no PATH at all, and a hook or a service may have another PATH than this shell
          const text = Fs.readFileSync(Path.join(dist, bundle), "utf8")
          Fs.writeFileSync(Path.join(into, program), namingNode(text, Fs.realpathSync(process.execPath)))
          Fs.chmodSync(Path.join(into, program), 0o755)
          // a program built as a CommonJS bundle run through V8's code cache (bin/build.mjs)
          const code = Path.join(dist, `${program}.cjs`)
          if (Fs.existsSync(code)) Fs.copyFileSync(code, Path.join(into, `${program}.cjs`))
          return program
        })
        // the static C programs, beside the programs, where src/containers/fuse/Mount.ts and the
        // container server look: the FUSE mount helper, the relay to a container's proxy and the
        // binder of a taken spare's volumes, the container proxy (src/containers/proxy/proxy.c), the
        // maker of a container's disk and overlay mounts (src/containers/deploy/mounts.c); and the
        // flock(2) addon (src/care/NativeFlock.ts)
        for (const binary of ["fusemountfd", "ocx2-container-relay", "ocx2-container-volumes", "ocx2-container-proxy-c", "ocx2-container-mounts", "ocx2-flock.node"]) {
          if (!Fs.existsSync(Path.join(dist, binary))) continue
          Fs.copyFileSync(Path.join(dist, binary), Path.join(into, binary))
          Fs.chmodSync(Path.join(into, binary), 0o755)
        }
        // the programs have no extension: this makes node load them as ES modules
        Fs.writeFileSync(Path.join(into, "package.json"), `${JSON.stringify({ type: "module", private: true }, null, 2)}\n`)
        Fs.writeFileSync(
          Path.join(into, "release.json"),
          // the Node the programs' first line names, so a host whose Node changed says so (StagedNode.ts)
          `${JSON.stringify({ name: release.name, checkin: release.checkin.hash, vcs: release.checkin.vcs, modified: release.checkin.modified, staged: new Date().toISOString(), node: thisNode() }, null, 2)}\n`
        )
        for (const pkg of plan.packages) {
          const from = Path.join(checkout, pkg.relativeDir)
          Fs.cpSync(from, Path.join(into, pkg.relativeDir), {
            recursive: true,
            dereference: true,
            filter: (source) => {
              const inside = Path.relative(from, source)
              return keepInRelease(pkg, inside, isDirectory(source))
            }
          })
        }
        return programs.sort()
      })
    }),

  smoke: (dir, log) =>
    Effect.gen(function*() {
      const program = Path.join(dir, "ocx2")
      // twice, as Fossil runs an extension's program: from /, with no environment at all; the
      // second run finds the code cache the first wrote, as every later call will
      for (const run of ["first", "second"]) {
        const heading = `$ env -i ${program} ${smokeArguments.join(" ")}   (from /, the ${run} run)`
        if (run === "first") yield* io(log, () => Fs.closeSync(openLog(log, heading)))
        else appendLog(log, `\n${heading}`)
        const chunks: Array<Buffer> = []
        const exit = yield* runProcess(program, smokeArguments, { cwd: "/", env: {}, stdio: ["ignore", "pipe", "pipe"], timeoutMs: smokeTimeoutMs }, (chunk) => {
          chunks.push(chunk)
          appendLogRaw(log, chunk)
        }).pipe(Effect.mapError((e) => new StepFailed({ step: "smoke", log, reason: e.reason })))
        const stdout = Buffer.concat(chunks).toString("utf8")
        if (exit.code !== 0) {
          appendLog(log, `\nsmoke ended: ${endedHow(exit, `${smokeTimeoutMs / 1000} s`)}`)
          return yield* new StepFailed({ step: "smoke", log, reason: `${run === "first" ? "" : "the second run, with the code cache: "}${endedHow(exit, `${smokeTimeoutMs / 1000} s`)}` })
        }
        const wrong = checkSmokeAnswer(stdout)
        appendLog(log, `\nsmoke (the ${run} run): ${wrong ?? "answered as the list tool answers"}`)
        if (wrong !== undefined) return yield* new StepFailed({ step: "smoke", log, reason: `${run === "first" ? "" : "the second run, with the code cache: "}${wrong}` })
      }
    }),

  place: (from, to) =>
    io(to, () => {
      if (Fs.existsSync(to)) {
        const old = `${to}.old.${process.pid}`
        Fs.renameSync(to, old)
        Fs.renameSync(from, to)
        Fs.rmSync(old, { recursive: true, force: true })
      } else {
        Fs.renameSync(from, to)
      }
    }),

  remove: (path) => Effect.sync(() => Fs.rmSync(path, { recursive: true, force: true }))
}

const appendLogRaw = (log: string, chunk: Buffer) => {
  try {
    Fs.appendFileSync(log, chunk)
  } catch {
    // as appendLog
  }
}

/** The release root on this host's file system. */
export const layer: Layer.Layer<ReleaseRoot> = Layer.succeed(ReleaseRoot, make)
