// create's first layer, the pattern (seed 001, "Write a run").
//
// Reading: `--pattern` takes an http(s) URL, or a wiki page name of the served repository
// (`run/NAME`, the convention; any name without a URL scheme). A URL of the served repository
// itself (it starts with a base URL the repository was served at, or its email-url) is read
// from the repository, never over HTTP, and only as a wiki page (BASE/wiki?name=NAME or
// BASE/wiki/NAME); any other page of it is refused, since its other pages (files of check-ins,
// attachments) are written by users with check-in alone. Of a wiki page, the newest version in
// server order whose sender (by receipt) holds admin or setup is read; versions by others are
// passed by. Any other URL is fetched without signing in, as it is: the caller vouches for it.

import type BetterSqlite3 from "better-sqlite3"
import { openDatabase } from "../../fossil/Sqlite.js"
import * as Effect from "effect/Effect"
import { cardValue, parseArtifact } from "../../fossil/Artifact.js"
import { content } from "../../fossil/Content.js"
import * as Read from "../../fossil/Read.js"
import { isAdminOrSetup } from "../../protocol/Senders.js"
import { type Act, CallRefused, refuse } from "../../operations/Operations.js"
import { servedBaseUrls } from "./RepositoryFile.js"

export interface PatternRead {
  readonly fields: Readonly<Record<string, unknown>>
  /** what was read: the URL, or wiki/NAME of the served repository */
  readonly source: string
  /** the wiki version read, and who sent it */
  readonly version?: string
  readonly sender?: string
}

export type PatternSource =
  | { readonly _tag: "Wiki"; readonly page: string }
  | { readonly _tag: "Url"; readonly url: URL }

const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/
const trimSlash = (s: string) => s.replace(/\/+$/, "")

/** Where a pattern comes from, given the served repository's base URLs; a string is a refusal. */
export const patternSource = (pattern: string, baseUrls: ReadonlyArray<string>): PatternSource | string => {
  if (!SCHEME.test(pattern)) {
    return pattern.trim() === "" || /[\x00-\x1f]/.test(pattern)
      ? `pattern: ${JSON.stringify(pattern)} is neither an http(s) URL nor a wiki page name`
      : { _tag: "Wiki", page: pattern }
  }
  let url: URL
  try {
    url = new URL(pattern)
  } catch {
    return `pattern: ${JSON.stringify(pattern)} is not a URL`
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return `pattern: ${url.protocol} is not taken: a pattern is an http or https URL, or run/NAME, a wiki page of the served repository`
  }
  for (const raw of baseUrls) {
    let base: URL
    try {
      base = new URL(raw)
    } catch {
      continue
    }
    const basePath = trimSlash(base.pathname)
    if (url.origin !== base.origin || !(url.pathname === basePath || url.pathname.startsWith(`${basePath}/`))) continue
    const rest = url.pathname.slice(basePath.length)
    const named = rest === "/wiki" ? url.searchParams.get("name") : rest.startsWith("/wiki/") ? decodeURIComponent(rest.slice(6)) : null
    if (named !== null && named !== "") return { _tag: "Wiki", page: named }
    return `pattern: ${url.href} is a page of the served repository but not one of its wiki pages; a pattern from it is a wiki page, ${trimSlash(raw)}/wiki?name=run/NAME`
  }
  return { _tag: "Url", url }
}

const maxPatternBytes = 1 << 20

/** The first fenced ```json block of a text (CommonMark fences, as 2.0 reads them). */
export const firstJsonBlock = (text: string): string | undefined => {
  const lines = text.split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l))
  for (let i = 0; i < lines.length; i++) {
    const open = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(lines[i]!)
    if (open === null) continue
    const fence = open[1]!
    const info = open[2]!.trim()
    if (fence[0] === "`" && info.includes("`")) continue
    const close = new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}[ \\t]*$`)
    const body: Array<string> = []
    let j = i + 1
    while (j < lines.length && !close.test(lines[j]!)) body.push(lines[j++]!)
    if (fence[0] === "`" && info.toLowerCase() === "json") return body.join("\n")
    i = j
  }
  return undefined
}

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const fieldsOfText = (text: string, source: string): Effect.Effect<Readonly<Record<string, unknown>>, CallRefused> => {
  const block = firstJsonBlock(text)
  if (block === undefined) return refuse(`the pattern ${source} holds no fenced json block`)
  let value: unknown
  try {
    value = JSON.parse(block)
  } catch (e) {
    return refuse(`the pattern ${source}: its json block does not parse: ${(e as Error).message}`)
  }
  return isObject(value) ? Effect.succeed(value) : refuse(`the pattern ${source}: its json block is not an object of a run's fields`)
}

interface WikiVersion {
  readonly hash: string
  readonly sender: string
  readonly text: string
}

/** The newest version (server order) of a wiki page whose sender holds admin or setup, and how many newer ones were passed by. */
export const wikiVersionByAdmin = (repository: string, page: string): { readonly version: WikiVersion | undefined; readonly passedBy: number } => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    return db.transaction(() => {
      const rows = db.prepare<[string], { rid: number; hash: string; sender: string | null }>(
        `SELECT b.rid, b.uuid AS hash, u.login AS sender
         FROM tag t JOIN tagxref x ON x.tagid = t.tagid JOIN blob b ON b.rid = x.rid
         LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid
         WHERE t.tagname = 'wiki-' || ? AND b.size >= 0 AND NOT EXISTS (SELECT 1 FROM private p WHERE p.rid = b.rid)
         ORDER BY b.rcvid DESC, b.rid DESC`
      ).all(page)
      let passedBy = 0
      for (const row of rows) {
        const fullcap = row.sender === null ? undefined : Read.user(db, row.sender)?.fullcap
        const bytes = isAdminOrSetup(fullcap) ? content(db, row.rid) : undefined
        const parsed = bytes === undefined ? undefined : parseArtifact(bytes)
        if (parsed === undefined || cardValue(parsed, "L") !== page) {
          passedBy++
          continue
        }
        return { version: { hash: row.hash, sender: row.sender!, text: parsed.wiki ?? "" }, passedBy }
      }
      return { version: undefined, passedBy }
    })()
  } finally {
    db.close()
  }
}

const fetchText = (url: URL): Effect.Effect<string, CallRefused> =>
  Effect.tryPromise({
    try: async () => {
      const response = await fetch(url, { redirect: "follow", signal: AbortSignal.timeout(15_000) })
      if (!response.ok) throw new Error(`it answered HTTP ${response.status}`)
      const body = Buffer.from(await response.arrayBuffer())
      if (body.length > maxPatternBytes) throw new Error(`it is ${body.length} bytes; a pattern is at most ${maxPatternBytes}`)
      return body.toString("utf8")
    },
    catch: (e) => {
      const error = e as Error & { cause?: Error }
      return new CallRefused({ message: `the pattern ${url.href} cannot be fetched: ${error.cause?.message ?? error.message}` })
    }
  })

/** Reads a pattern's fields; every step is a read, done in a dry run too. */
export const readPattern = (pattern: string, served: string, act: Act): Effect.Effect<PatternRead, CallRefused> =>
  Effect.gen(function*() {
    const source = patternSource(pattern, yield* Effect.try({ try: () => servedBaseUrls(served), catch: (e) => new CallRefused({ message: `${served}: ${(e as Error).message}` }) }))
    if (typeof source === "string") return yield* refuse(source)
    if (source._tag === "Url") {
      const text = yield* fetchText(source.url)
      act.note("pattern", `fetched ${source.url.href} without signing in`)
      return { fields: yield* fieldsOfText(text, source.url.href), source: source.url.href }
    }
    const { version, passedBy } = yield* Effect.try({
      try: () => wikiVersionByAdmin(served, source.page),
      catch: (e) => new CallRefused({ message: `the wiki page ${source.page} cannot be read: ${(e as Error).message}` })
    })
    const others = passedBy === 0 ? "" : ` (${passedBy} newer version${passedBy === 1 ? "" : "s"} by users without admin or setup passed by)`
    if (version === undefined) {
      return yield* refuse(`the pattern ${source.page}: no version of that wiki page of the served repository was written by a user holding admin or setup${others}`)
    }
    act.note("pattern", `read wiki page ${source.page} of the served repository: version ${version.hash} by ${version.sender}${others}`)
    const fields = yield* fieldsOfText(version.text, `wiki page ${source.page}`)
    return { fields, source: `wiki/${source.page}`, version: version.hash, sender: version.sender }
  })

/** Layers of fields: an object over an object merges member by member; any other value replaces. */
export const mergeFields = (under: unknown, over: unknown): unknown =>
  isObject(under) && isObject(over)
    // fromEntries defines own properties, so a key such as __proto__ stays a key
    ? Object.fromEntries([
      ...Object.entries(under).map(([key, value]) => [key, Object.hasOwn(over, key) ? mergeFields(value, over[key]) : value]),
      ...Object.entries(over).filter(([key]) => !Object.hasOwn(under, key))
    ])
    : over
