// Server paths (ROOT, the repository's file, a care directory) are for setup users only
// (issue 40): for anyone else the pages and their JSON show each absolute path as [server path].

import type { Answer, Caller } from "../tools/Tool.js"
import { hasCapability } from "../tools/support/Permissions.js"

export const REDACTED = "[server path]"

/**
 * An absolute path where a word starts (after a space, a quote, a bracket, = or :), as the
 * answers write them; a URL's path follows its host, so links are left alone.
 */
const absolutePath = /(^|[\s"'(\[=,:])\/(?![\s/])[^\s"'()\[\]<>,;]*/g

export const redactText = (text: string): string => text.replace(absolutePath, (_whole, before: string) => `${before}${REDACTED}`)

/** What the record holds (a run's output, its reports, posts): shown as written, escaped, never rewritten. */
const recordKeys: ReadonlySet<string> = new Set(["events", "reports", "posts", "text", "comment", "changes"])

const redactValue = (value: unknown): unknown => {
  if (typeof value === "string") return redactText(value)
  if (Array.isArray(value)) return value.map(redactValue)
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, recordKeys.has(key) ? item : redactValue(item)]))
  }
  return value
}

export const seesServerPaths = (caller: Caller): boolean => hasCapability(caller, "s")

/** The answer as this caller may see it: unchanged for a setup user, every server path redacted otherwise. */
export const answerFor = <A>(answer: Answer<A>, caller: Caller): Answer<A> =>
  seesServerPaths(caller) ? answer : (redactValue(answer) as Answer<A>)
