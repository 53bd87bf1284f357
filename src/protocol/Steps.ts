// 2.7 and 2.6 at check time: each step's kind, keys and needs, and every placeholder set
// before it is used (refusal 3). Values that steps set are not known until they run, so
// the plan keeps them symbolic: the text with what is known substituted, the rest named.
import * as Either from "effect/Either"
import {
  describeProblem,
  firstProblem,
  isPlaceholderName,
  placeholder,
  placeholdersIn,
  startPlaceholders,
  type PlaceholderName,
  type StartValues,
  type StepPlaceholder
} from "./Placeholders.js"
import { cwdOf, type Run } from "./Run.js"
import { isStepKindName, stepKind, stepKindNames, type StepKindName } from "./StepKinds.js"

/** A text as far as it is known at check time. */
export interface PlannedText {
  /** the text with every known value substituted; step values not yet known stay `$$name$$` */
  readonly text: string
  /** the step-set placeholders whose values are still to come */
  readonly pending: ReadonlyArray<StepPlaceholder>
}

export const isKnown = (planned: PlannedText): boolean => planned.pending.length === 0

export interface PlannedStep {
  readonly index: number
  readonly step: StepKindName
  readonly keys: Readonly<Record<string, PlannedText | ReadonlyArray<PlannedText>>>
  readonly sets: ReadonlyArray<StepPlaceholder>
}

/** Where a path stands, which decides what refusal 7 allows of it. */
export type PathRole = "directory" | "into" | "read_only" | "read_write" | "homes" | "cwd" | "unversioned_files"

export interface PlannedPath {
  /** dotted key of the run: `workspace[0].at`, `sandbox.read_only[2]` */
  readonly key: string
  readonly role: PathRole
  /** the text as the run writes it */
  readonly raw: string
  readonly text: PlannedText
  /** $$workspace$$ as it stands where the path is used, if a step set it by then */
  readonly workspace: PlannedText | undefined
}

export interface Plan {
  readonly steps: ReadonlyArray<PlannedStep>
  /** the values once every step has run (start values known, step values as planned) */
  readonly values: Readonly<Partial<Record<PlaceholderName, PlannedText>>>
  /** every text of sandbox and process that takes placeholders, by dotted key */
  readonly texts: Readonly<Record<string, PlannedText>>
  /** every path refusal 7 judges */
  readonly paths: ReadonlyArray<PlannedPath>
  readonly cwd: PlannedText
  readonly hasWorkspace: boolean
}

type PlanValues = Partial<Record<PlaceholderName, PlannedText>>

const symbolic = (name: StepPlaceholder): PlannedText => ({ text: placeholder(name), pending: [name] })

const union = <A>(a: ReadonlyArray<A>, b: ReadonlyArray<A>): ReadonlyArray<A> => [...new Set([...a, ...b])]

/** Substitutes the planned values into a text whose placeholders are all set (checked before). */
const plan = (text: string, values: PlanValues): PlannedText => {
  let pending: ReadonlyArray<StepPlaceholder> = []
  const out = text.replace(/\$\$([A-Za-z0-9_]+)\$\$/g, (whole, name: string) => {
    const value = isPlaceholderName(name) ? values[name] : undefined
    if (value === undefined) return whole
    pending = union(pending, value.pending)
    return value.text
  })
  return { text: out, pending }
}

const stepWhere = (index: number, kind: string) => `workspace[${index}] (${kind})`

/** The texts of sandbox and process in which placeholders stand (2.6), by dotted key. */
export const placeholderTexts = (run: Run): ReadonlyArray<readonly [string, string]> => {
  const texts: Array<readonly [string, string]> = []
  const sandbox = run.sandbox
  if (sandbox !== undefined) {
    texts.push(["sandbox.proc", sandbox.proc], ["sandbox.dev", sandbox.dev], ["sandbox.tmp", sandbox.tmp])
    for (const list of ["read_only", "read_write", "homes"] as const) {
      sandbox[list].forEach((path, i) => texts.push([`sandbox.${list}[${i}]`, path]))
    }
    sandbox.created_files.forEach((file, i) => {
      texts.push([`sandbox.created_files[${i}].at`, file.at], [`sandbox.created_files[${i}].text`, file.text])
    })
  }
  run.process.command.forEach((arg, i) => texts.push([`process.command[${i}]`, arg]))
  for (const [name, value] of Object.entries(run.process.env)) texts.push([`process.env.${name}`, value])
  texts.push(["process.cwd", cwdOf(run)])
  run.process.unversioned_files.forEach((file, i) => {
    texts.push([`process.unversioned_files[${i}].at`, file.at], [`process.unversioned_files[${i}].as`, file.as])
  })
  return texts
}

const pathRoles: ReadonlyArray<readonly [RegExp, PathRole]> = [
  [/^sandbox\.read_only\[/, "read_only"],
  [/^sandbox\.read_write\[/, "read_write"],
  [/^sandbox\.homes\[/, "homes"],
  [/^process\.cwd$/, "cwd"],
  [/^process\.unversioned_files\[\d+\]\.at$/, "unversioned_files"]
]

/**
 * Checks the steps and placeholders of a decoded run (refusal 3) and returns its plan.
 * The Left is the note of refusal 3, naming the step or key and the placeholder.
 */
export const planRun = (run: Run, start: StartValues): Either.Either<Plan, string> => {
  const values: PlanValues = {}
  for (const name of startPlaceholders) values[name] = { text: start[name], pending: [] }
  const steps: Array<PlannedStep> = []
  const paths: Array<PlannedPath> = []

  for (const [index, raw] of run.workspace.entries()) {
    const kind = raw["step"]
    if (kind === undefined) return Either.left(`workspace[${index}]: a step without its kind (step)`)
    if (typeof kind !== "string" || !isStepKindName(kind)) {
      return Either.left(
        `workspace[${index}]: ${JSON.stringify(kind)} is not a step kind version 2 has (${stepKindNames.join(", ")})`
      )
    }
    const where = stepWhere(index, kind)
    const table = stepKind(kind)
    const missing = Object.keys(table.keys).find((key) => !Object.hasOwn(raw, key))
    if (missing !== undefined) return Either.left(`${where}: missing key ${missing}`)
    const extra = Object.keys(raw).find((key) => key !== "step" && !Object.hasOwn(table.keys, key))
    if (extra !== undefined) return Either.left(`${where}: a key this step does not have: ${extra}`)
    const unmet = table.needs.find((name) => values[name] === undefined)
    if (unmet !== undefined) return Either.left(`${where}: needs $$${unmet}$$, which no step before it sets`)

    const available = new Set(Object.keys(values) as ReadonlyArray<PlaceholderName>)
    const keys: Record<string, PlannedText | ReadonlyArray<PlannedText>> = {}
    for (const key of Object.keys(table.keys)) {
      const value = raw[key] as string | ReadonlyArray<string>
      const texts = typeof value === "string" ? [value] : value
      for (const [i, text] of texts.entries()) {
        const problem = firstProblem(text, available)
        const keyName = typeof value === "string" ? `workspace[${index}].${key}` : `workspace[${index}].${key}[${i}]`
        if (problem !== undefined) return Either.left(describeProblem(problem, keyName))
      }
      keys[key] = typeof value === "string" ? plan(value, values) : value.map((text) => plan(text, values))
    }
    const pathKey = kind === "directory" ? "at" : Object.hasOwn(table.keys, "into") ? "into" : undefined
    if (pathKey !== undefined) {
      paths.push({
        key: `workspace[${index}].${pathKey}`,
        role: kind === "directory" ? "directory" : "into",
        raw: raw[pathKey] as string,
        text: keys[pathKey] as PlannedText,
        workspace: values.workspace
      })
    }
    steps.push({ index, step: kind, keys, sets: table.sets })

    switch (kind) {
      case "directory":
        values.workspace = keys["at"] as PlannedText
        break
      case "files":
      case "checkout":
        values.tree = keys["into"] as PlannedText
        values.checkin = symbolic("checkin")
        break
      case "clone":
        values.clone = keys["into"] as PlannedText
        break
      case "password":
        values.password = symbolic("password")
        break
      case "collect":
        break
    }
  }

  const available = new Set(Object.keys(values) as ReadonlyArray<PlaceholderName>)
  const texts: Record<string, PlannedText> = {}
  for (const [key, text] of placeholderTexts(run)) {
    const problem = firstProblem(text, available)
    if (problem !== undefined) return Either.left(describeProblem(problem, key))
    texts[key] = plan(text, values)
    const role = pathRoles.find(([pattern]) => pattern.test(key))?.[1]
    if (role !== undefined) paths.push({ key, role, raw: text, text: texts[key], workspace: values.workspace })
  }
  if (run.process.verdict && values.checkin === undefined) {
    return Either.left("process.verdict: no step sets $$checkin$$ (a files or checkout step)")
  }
  if ((run.sandbox?.homes.length ?? 0) > 0 && values.workspace === undefined) {
    return Either.left("sandbox.homes: the run has no workspace (no directory step) to see them in")
  }
  if (run.process.unversioned_files.length > 0 && values.workspace === undefined) {
    return Either.left("process.unversioned_files: the run has no workspace (no directory step)")
  }
  return Either.right({
    steps,
    values,
    texts,
    paths,
    cwd: texts["process.cwd"]!,
    hasWorkspace: values.workspace !== undefined
  })
}

/** The step-set placeholders a text uses (what the watcher must know before using it). */
export const stepPlaceholdersIn = (text: string): ReadonlyArray<StepPlaceholder> =>
  placeholdersIn(text).filter((name): name is StepPlaceholder =>
    (["workspace", "tree", "checkin", "clone", "password"] as ReadonlyArray<string>).includes(name)
  )

/** The start values of a run on a host (2.6). */
export const startValues = (input: {
  readonly root: string
  readonly releaseDir: string
  readonly runHash: string
  readonly processUser: string
  readonly repositoryName: string
  readonly nodeUser: string
}): StartValues => ({
  root: input.root,
  release: input.releaseDir,
  run: input.runHash,
  process_user: input.processUser,
  repository_name: input.repositoryName,
  node_user: input.nodeUser
})
