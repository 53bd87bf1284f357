/**
 * ReleaseRoot: the release root on disk (seed 001, "Stage, accept or roll back a release").
 * Its methods are the root's primitives (read what is served, switch a link atomically, run
 * a checkout's step logged to a file, copy and smoke a release); the tools' logic, and their
 * operations logs, live in src/release. Live layer: layers/ReleaseRootFs.ts.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Schema from "effect/Schema"

/** The three links that say what is served, each a relative link to staged/NAME. */
export type ServedLink = "next" | "current" | "previous"

/** A program released into a root: ROOT/staged/NAME/PROGRAM, read off its real path. */
export interface ProgramRelease {
  readonly root: string
  /** The release it belongs to: NAME. */
  readonly name: string
  /** The program's own name in the release, such as ocx2 or ocx2-cgi. */
  readonly program: string
}

/** One package to copy: its directory relative to the checkout (node_modules/NAME, or nested). */
export interface RuntimePackage {
  readonly name: string
  readonly relativeDir: string
  /** Built from native sources (binding.gyp): only its compiled addon is copied of build/. */
  readonly native: boolean
}

/** Reading or changing the root failed. */
export class ReleaseRootError extends Schema.TaggedError<ReleaseRootError>()("ReleaseRootError", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.path}: ${this.reason}`
  }
}

/** The directory given to stage is neither a git nor a Fossil checkout. */
export class NotACheckout extends Schema.TaggedError<NotACheckout>()("NotACheckout", {
  path: Schema.String
}) {
  override get message() {
    return `${this.path} is neither a git nor a Fossil checkout`
  }
}

/** The checkout cannot be staged as it stands (no build script, an external not installed). */
export class CheckoutUnfit extends Schema.TaggedError<CheckoutUnfit>()("CheckoutUnfit", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.path} cannot be staged: ${this.reason}`
  }
}

/** A step of stage (gate, build, copy, smoke) failed; its log says why. */
export class StepFailed extends Schema.TaggedError<StepFailed>()("StepFailed", {
  step: Schema.String,
  log: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `the ${this.step} failed (${this.reason}); its log is ${this.log}`
  }
}

/** Another stage, accept or rollback holds the root's lock. */
export class RootBusy extends Schema.TaggedError<RootBusy>()("RootBusy", {
  lock: Schema.String
}) {
  override get message() {
    return `another stage, accept or rollback is changing this root (it holds ${this.lock}); try again when it is done`
  }
}

/** What one served link says. */
export interface ServedRelease {
  readonly name: string
  /** Whether ROOT/staged/NAME is there. */
  readonly present: boolean
}

/** What the root serves now. */
export interface ReleaseState {
  readonly root: string
  readonly next?: ServedRelease
  readonly current?: ServedRelease
  readonly previous?: ServedRelease
  /** The target of ROOT/ocx2-hook as written, when it is a link. */
  readonly hookLink?: string
}

/** A checkout's check-in. */
export interface Checkin {
  readonly vcs: "git" | "fossil"
  /** The checkout's top directory. */
  readonly top: string
  /** The check-in's full hash. */
  readonly hash: string
  /** Whether the checkout holds changes not checked in (the release is then not exactly its check-in). */
  readonly modified: boolean
}

/** What stage will copy: from the checkout's package.json and installed tree, read before anything runs. */
export interface CopyPlan {
  readonly externals: ReadonlyArray<string>
  readonly packages: ReadonlyArray<RuntimePackage>
}

export interface ReleaseRootService {
  /** The real path of `root`, which must be a directory. */
  readonly resolveRoot: (root: string) => Effect.Effect<string, ReleaseRootError>
  /** The root the program at `programPath` was released into (its real path is ROOT/staged/NAME/PROGRAM). */
  readonly rootOfProgram: (programPath: string | undefined) => Effect.Effect<string | undefined>
  /**
   * Which release of which root the program at `programPath` is: its real path, links followed
   * (through a link or a chain of links), is ROOT/staged/NAME/PROGRAM; undefined otherwise.
   */
  readonly releaseOfProgram: (programPath: string | undefined) => Effect.Effect<ProgramRelease | undefined>
  /** What ROOT's links serve; a link that names no staged release is an error naming it. */
  readonly read: (root: string) => Effect.Effect<ReleaseState, ReleaseRootError>
  /** Whether ROOT/staged/NAME holds the program. */
  readonly hasProgram: (root: string, name: string, program: string) => Effect.Effect<boolean>
  /** Points ROOT/LINK at `target` atomically: a temporary link renamed over the old one. */
  readonly switchLink: (root: string, link: ServedLink | "ocx2-hook", target: string) => Effect.Effect<void, ReleaseRootError>
  /** Holds ROOT's lock for the scope; refused at once when another holds it. */
  readonly lock: (root: string) => Effect.Effect<void, RootBusy | ReleaseRootError, Scope.Scope>
  /** The check-in of a git or Fossil checkout. */
  readonly checkinOf: (checkout: string) => Effect.Effect<Checkin, NotACheckout>
  /** Reads the checkout's package.json and node_modules: what stage will copy beside the bundles. */
  readonly planCopy: (checkout: string) => Effect.Effect<CopyPlan, CheckoutUnfit>
  /**
   * Runs `npm run -s SCRIPT` in the checkout, its output written into `log` as it runs, and given
   * to `output` as it comes (for a person watching at a terminal), when one is given.
   */
  readonly runScript: (
    checkout: string,
    script: "gate" | "build",
    log: string,
    output?: (text: string) => void
  ) => Effect.Effect<void, StepFailed | ReleaseRootError>
  /**
   * Assembles a release in `into`: each dist/NAME.mjs as the executable NAME, package.json, the
   * packages; a build that left no dist/ocx2.mjs fails as the build, naming its log.
   */
  readonly assemble: (
    checkout: string,
    plan: CopyPlan,
    into: string,
    release: { readonly name: string; readonly checkin: Checkin; readonly buildLog: string }
  ) => Effect.Effect<ReadonlyArray<string>, StepFailed | ReleaseRootError>
  /** Runs `DIR/ocx2 --json list` and checks its answer; output into `log`. */
  readonly smoke: (dir: string, log: string) => Effect.Effect<void, StepFailed | ReleaseRootError>
  /** Moves an assembled release to its place, replacing what was there. */
  readonly place: (from: string, to: string) => Effect.Effect<void, ReleaseRootError>
  /** Removes a directory and everything in it (an assembly that failed). */
  readonly remove: (path: string) => Effect.Effect<void>
}

export class ReleaseRoot extends Context.Tag("ocx2/ReleaseRoot")<ReleaseRoot, ReleaseRootService>() {}
