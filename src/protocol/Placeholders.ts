// 2.6: `$$NAME$$` placeholders, which are set from the start and which by a step.
import * as Either from "effect/Either"

export const startPlaceholders = [
  "root",
  "release",
  "run",
  "process_user",
  "repository_name",
  "node_user"
] as const
export const stepPlaceholders = ["workspace", "tree", "checkin", "clone", "password"] as const

export type StartPlaceholder = (typeof startPlaceholders)[number]
export type StepPlaceholder = (typeof stepPlaceholders)[number]
export type PlaceholderName = StartPlaceholder | StepPlaceholder

export const placeholderNames: ReadonlyArray<PlaceholderName> = [...startPlaceholders, ...stepPlaceholders]

export const isPlaceholderName = (name: string): name is PlaceholderName =>
  (placeholderNames as ReadonlyArray<string>).includes(name)
export const isStepPlaceholder = (name: string): name is StepPlaceholder =>
  (stepPlaceholders as ReadonlyArray<string>).includes(name)

/** Values known when a run arrives. */
export type StartValues = Readonly<Record<StartPlaceholder, string>>

/** The values of placeholders: start values and what steps have set so far. */
export type Values = Readonly<Partial<Record<PlaceholderName, string>>>

/**
 * Anything of the form `$$WORD$$` is taken as a placeholder, WORD of letters, digits and
 * `_` in any case, so that a misspelt one (`$$Workspace$$`) is refused rather than passed
 * on literally. Scanning is left to right, one pass: a value is never scanned again.
 */
const PLACEHOLDER = /\$\$([A-Za-z0-9_]+)\$\$/g

/** The placeholder names a text uses, in order, with repeats. */
export const placeholdersIn = (text: string): ReadonlyArray<string> =>
  Array.from(text.matchAll(PLACEHOLDER), (match) => match[1]!)

export const placeholder = (name: PlaceholderName): string => `$$${name}$$`

/**
 * Replaces each placeholder by its value. Fails with the first name that has no value
 * (unknown or not set), so nothing half-substituted is ever used.
 */
export const substitute = (text: string, values: Values): Either.Either<string, string> => {
  let missing: string | undefined
  const out = text.replace(PLACEHOLDER, (whole, name: string) => {
    const value = isPlaceholderName(name) ? values[name] : undefined
    if (value === undefined) {
      missing ??= name
      return whole
    }
    return value
  })
  return missing === undefined ? Either.right(out) : Either.left(missing)
}

/**
 * Replaces the placeholders whose value is given and leaves the others as they stand:
 * how a run's texts look at check time, before the steps have run.
 */
export const substituteKnown = (text: string, values: Values): string =>
  text.replace(PLACEHOLDER, (whole, name: string) => (isPlaceholderName(name) ? (values[name] ?? whole) : whole))

/** Where the placeholders stand, for the note of refusal 3. */
export type PlaceholderProblem =
  | { readonly _tag: "Unknown"; readonly name: string }
  | { readonly _tag: "NotSet"; readonly name: PlaceholderName }

/** The first placeholder of a text that is unknown or not in `available`. */
export const firstProblem = (
  text: string,
  available: ReadonlySet<PlaceholderName>
): PlaceholderProblem | undefined => {
  for (const name of placeholdersIn(text)) {
    if (!isPlaceholderName(name)) return { _tag: "Unknown", name }
    if (!available.has(name)) return { _tag: "NotSet", name }
  }
  return undefined
}

export const describeProblem = (problem: PlaceholderProblem, where: string): string =>
  problem._tag === "Unknown"
    ? `${where}: $$${problem.name}$$ is not a placeholder version 2 has`
    : `${where}: $$${problem.name}$$ is not set by then`
