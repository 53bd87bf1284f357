// import's one untrusted step: cloning the upstream and turning its history into a Fossil
// repository, in a sandbox as a run's process is (bubblewrap, its uid, the system read-only),
// writing only its work directory. The upstream is someone else's: its clone, its fast-export
// and Fossil's importer reading that stream never run outside the sandbox.

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type LaunchSpec, SandboxLauncher } from "../../services/SandboxLauncher.js"
import { firstParentBranches, readNoFollow, relabelStream } from "./FastExportBranches.js"

/** The import did not complete: which step, and what it said. */
export class ImportFailed extends Schema.TaggedError<ImportFailed>()("ImportFailed", { message: Schema.String }) {}

/** What the sandbox leaves in the work directory. */
export interface Imported {
  /** the upstream's own branch (its HEAD), which became trunk */
  readonly mainBranch: string
  /** WORK/upstream.git: a bare clone of the upstream's branches and tags */
  readonly upstream: string
  /** WORK/new.fossil */
  readonly repository: string
  /** ":MARK GITHASH" lines of git fast-export, and "cRID :MARK UUID" lines of fossil import */
  readonly gitMarks: string
  readonly fossilMarks: string
}

/** The sandbox's uid: the caller's own, or for root an unprivileged one the work directory is given to. */
const sandboxIds = (): { readonly uid: number; readonly gid: number } => {
  const uid = process.getuid?.() ?? 65534
  const gid = process.getgid?.() ?? 65534
  return uid === 0 ? { uid: 65534, gid: 65534 } : { uid, gid }
}

/** The first step's script: the clone, its fast-export and each branch's first-parent line.
 * Its arguments come as positional parameters, never spliced into it. */
const exportScript = [
  "set -eu",
  'upstream="$1"; cd "$2"',
  'git clone --quiet --bare -- "$upstream" upstream.git',
  'main=$(git -C upstream.git symbolic-ref --short HEAD)',
  // the upstream's own branch becomes trunk: fossil import makes trunk of a branch named master
  'if [ "$main" = master ]; then set --; else',
  '  if git -C upstream.git show-ref --verify --quiet refs/heads/master; then',
  '    echo "the upstream has a branch master besides its own branch $main: fossil import would make both trunk" >&2; exit 3',
  "  fi",
  '  set -- --refspec "refs/heads/$main:refs/heads/master"',
  "fi",
  'git -C upstream.git fast-export --all --show-original-ids --signed-tags=strip --tag-of-filtered-object=drop --export-marks="$PWD/git.marks" "$@" > stream',
  // the branches in the order they claim commits: the upstream's own first, then the others by name
  '{ printf "%s\\n" "$main"; git -C upstream.git for-each-ref --sort=refname --format="%(refname:short)" refs/heads/ | grep -vxF -- "$main" || true; } > branches',
  'while IFS= read -r b; do printf "#%s\\n" "$b"; git -C upstream.git rev-list --first-parent "refs/heads/$b" --; done < branches > first-parents',
  'printf "%s\\n" "$main" > main.branch'
].join("\n")

/** The second step's script: Fossil's importer reading the relabelled stream. */
const importScript = [
  "set -eu",
  'admin="$1"; cd "$2"',
  'fossil import --git --quiet --rename-master trunk -A "$admin" --export-marks "$PWD/fossil.marks" new.fossil < stream.fossil > import.out',
  "rm -f stream stream.fossil import.out branches first-parents"
].join("\n")

export const importInSandbox = (
  options: { readonly upstream: string; readonly localUpstream: string | undefined; readonly admin: string; readonly work: string; readonly ownPaths: ReadonlyArray<string> }
): Effect.Effect<Imported, ImportFailed, SandboxLauncher> =>
  Effect.gen(function*() {
    const launcher = yield* SandboxLauncher
    const ids = sandboxIds()
    if ((process.getuid?.() ?? 0) === 0) Fs.chownSync(options.work, ids.uid, ids.gid)
    const system = ["/usr", "/bin", "/lib", "/lib64", "/etc"].filter((p) => Fs.existsSync(p))
    /** one step in the sandbox; its failure names the step and the last lines it said */
    const step = (what: string, script: string, args: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const spec: LaunchSpec = {
          command: ["/bin/sh", "-c", script, "ocx2-import", ...args],
          env: {
            PATH: "/usr/local/bin:/usr/bin:/bin",
            HOME: options.work,
            USER: options.admin,
            LANG: "C.UTF-8",
            GIT_TERMINAL_PROMPT: "0",
            GIT_CONFIG_NOSYSTEM: "1",
            // no transport that runs a command (ext::) or reaches elsewhere than the upstream named
            GIT_ALLOW_PROTOCOL: options.localUpstream !== undefined ? "file" : "http:https:git",
            GIT_CONFIG_COUNT: "1",
            GIT_CONFIG_KEY_0: "safe.directory",
            GIT_CONFIG_VALUE_0: "*"
          },
          cwd: options.work,
          sandbox: {
            ...ids,
            linuxCapabilities: [],
            network: options.localUpstream === undefined,
            isolateTerminal: true,
            endsWithParent: true,
            proc: "/proc",
            dev: "/dev",
            tmp: "/tmp",
            readOnly: [...system, ...(options.localUpstream !== undefined ? [options.localUpstream] : [])],
            readWrite: [options.work],
            homes: [],
            createdFiles: [],
            ownPaths: options.ownPaths
          },
          limits: { wallSeconds: 3600 },
          stdin: { lines: [], keepOpen: false },
          keep: { stdout: 16 * 1024, stderr: 16 * 1024 }
        }
        const result = yield* launcher.run(spec).pipe(Effect.mapError((e) => new ImportFailed({ message: `the import's sandbox: ${e.message}` })))
        const said = new TextDecoder().decode(result.stderr.tail).trim().split("\n").filter((l) => !/password is/i.test(l)).slice(-5).join("; ")
        if (result.ending.outcome !== "exited" || result.ending.exit !== 0) {
          const how = result.ending.outcome === "exited" ? `exited ${result.ending.exit}` : result.ending.outcome === "budget" ? `ran out of ${result.ending.limit}` : "was stopped"
          return yield* Effect.fail(new ImportFailed({ message: `${what} of ${options.upstream} ${how}${said !== "" ? `: ${said}` : ""}` }))
        }
      })
    const inWork = (name: string) => Path.join(options.work, name)
    yield* step("the import", exportScript, [options.upstream, options.work])
    // between the two steps, outside the sandbox: the stream is only copied, its data never read
    yield* Effect.try({
      try: () => {
        const labels = firstParentBranches(readNoFollow(inWork("first-parents")), readNoFollow(inWork("main.branch")).trim())
        relabelStream(inWork("stream"), inWork("stream.fossil"), labels)
        if ((process.getuid?.() ?? 0) === 0) Fs.chownSync(inWork("stream.fossil"), ids.uid, ids.gid)
      },
      catch: (e) => new ImportFailed({ message: `the import of ${options.upstream}: the branches of its commits: ${(e as Error).message}` })
    })
    yield* step("the import", importScript, [options.admin, options.work])
    // what the sandbox made is the caller's again (git refuses to read a repository of another owner)
    if ((process.getuid?.() ?? 0) === 0) {
      const r = ChildProcess.spawnSync("chown", ["-R", `${process.getuid?.() ?? 0}:${process.getgid?.() ?? 0}`, options.work])
      if (r.status !== 0) return yield* Effect.fail(new ImportFailed({ message: `chown -R ${options.work}: ${r.stderr?.toString().trim()}` }))
    }
    const read = (name: string) => Fs.readFileSync(Path.join(options.work, name), "utf8")
    return {
      mainBranch: read("main.branch").trim(),
      upstream: Path.join(options.work, "upstream.git"),
      repository: Path.join(options.work, "new.fossil"),
      gitMarks: read("git.marks"),
      fossilMarks: read("fossil.marks")
    }
  })
