// The table of 2.7: each step kind's keys (with their type), its needs and what it sets.
import type { StepPlaceholder } from "./Placeholders.js"

/** path: a path text; text: any text; names: a list of texts */
export type StepKeyType = "path" | "text" | "names"

export interface StepKind {
  readonly keys: Readonly<Record<string, StepKeyType>>
  /** values a step before it must have set */
  readonly needs: ReadonlyArray<StepPlaceholder>
  readonly sets: ReadonlyArray<StepPlaceholder>
}

export const stepKinds = {
  directory: { keys: { at: "path" }, needs: [], sets: ["workspace"] },
  files: { keys: { of: "text", into: "path" }, needs: ["workspace"], sets: ["tree", "checkin"] },
  password: { keys: {}, needs: [], sets: ["password"] },
  clone: { keys: { into: "path", password: "text" }, needs: ["workspace"], sets: ["clone"] },
  checkout: { keys: { of: "text", into: "path" }, needs: ["clone"], sets: ["tree", "checkin"] },
  collect: { keys: { of: "names", into: "path" }, needs: ["workspace"], sets: [] }
} as const satisfies Readonly<Record<string, StepKind>>

export type StepKindName = keyof typeof stepKinds

export const stepKindNames = Object.keys(stepKinds) as ReadonlyArray<StepKindName>

export const isStepKindName = (name: string): name is StepKindName => Object.hasOwn(stepKinds, name)

export const stepKind = (name: StepKindName): StepKind => stepKinds[name]
