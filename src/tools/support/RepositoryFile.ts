// Which repository file a call acts on, and whether it is the served repository or a clone.
//
// Reading: a repository file that remembers a sync URL with a user (Fossil's last-sync-url,
// which `fossil clone` sets) is a clone of that server, acting as that user; any other is the
// served repository on its host. A served repository that was itself cloned from elsewhere
// forgets its remote with `fossil remote off -R REPO`.

import type BetterSqlite3 from "better-sqlite3"
import { openDatabase } from "../../fossil/Sqlite.js"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Repository, type ReadError } from "../../../services/Repository.js"
import type { ToolContext } from "../Tool.js"
import { type CallRefused, refuse } from "../../operations/Operations.js"

export interface ServedFile {
  readonly role: "served"
  readonly path: string
}

export interface CloneFile {
  readonly role: "clone"
  readonly path: string
  /** the server's URL as the clone remembers it, without the user */
  readonly url: string
  /** the user the clone remembers, who pushes */
  readonly user: string
  readonly projectCode: string
}

export type RepositoryFile = ServedFile | CloneFile

const config = (path: string): Map<string, string> => {
  const db = openDatabase(path, { readonly: true, fileMustExist: true })
  try {
    const rows = db.prepare<[], { name: string; value: unknown }>(
      "SELECT name, value FROM config WHERE name IN ('last-sync-url', 'project-code', 'email-url') OR name GLOB 'baseurl:*'"
    ).all()
    return new Map(rows.map((r) => [r.name, String(r.value ?? "")]))
  } finally {
    db.close()
  }
}

/** The repository file named for the call, with its role; refused when none is named or it cannot be read. */
export const repositoryFile = (tool: string, context: ToolContext): Effect.Effect<RepositoryFile, CallRefused> =>
  Effect.suspend(() => {
    if (context.repository === undefined) {
      return refuse(`${tool} acts on a repository file, and none was named (ocx2 --repository FILE; OCX_REPOSITORY for ocx2-mcp)`)
    }
    const path = Path.resolve(context.repository)
    if (!Fs.existsSync(path)) return refuse(`the repository ${path} does not exist`)
    let settings: Map<string, string>
    try {
      settings = config(path)
    } catch (e) {
      return refuse(`the repository ${path} cannot be read: ${(e as Error).message}`)
    }
    const remembered = settings.get("last-sync-url")
    if (remembered !== undefined && remembered !== "") {
      try {
        const url = new URL(remembered)
        const user = decodeURIComponent(url.username)
        if (user !== "") {
          url.username = ""
          url.password = ""
          return Effect.succeed<RepositoryFile>({ role: "clone", path, url: url.toString(), user, projectCode: settings.get("project-code") ?? "" })
        }
      } catch {
        // not a URL: not a clone we can push from
      }
    }
    return Effect.succeed<RepositoryFile>({ role: "served", path })
  })

/** The served repository, or a refusal saying the tool acts there and not on a clone. */
export const servedFile = (tool: string, context: ToolContext): Effect.Effect<ServedFile, CallRefused> =>
  Effect.flatMap(repositoryFile(tool, context), (file) =>
    file.role === "served"
      ? Effect.succeed(file)
      : refuse(`${tool} acts on the served repository, on its host or its web page; ${file.path} is a clone of ${file.url}`))

/**
 * The URLs the served repository is reached at: every base URL Fossil recorded as it served
 * a page (its `baseurl:` entries, which `fossil info` lists as access-url) and its email-url.
 */
export const servedBaseUrls = (path: string): ReadonlyArray<string> => {
  const settings = config(path)
  const urls: Array<string> = []
  for (const [name, value] of settings) {
    if (name.startsWith("baseurl:")) urls.push(name.slice("baseurl:".length))
    else if (name === "email-url" && value !== "") urls.push(value)
  }
  return urls
}

/**
 * The user a write is made as: the caller on the served repository (who must be a user of it);
 * on a clone the user it remembers, and only when that is the caller, since a push goes out
 * under the clone's remembered credentials.
 */
export const writingUser = (
  tool: string,
  context: ToolContext,
  file: RepositoryFile
): Effect.Effect<string, CallRefused | ReadError, Repository> =>
  Effect.gen(function*() {
    const caller = context.caller.user
    if (caller === undefined) return yield* refuse(`${tool} writes as your user, and this call names none: sign in`)
    if (file.role === "clone" && caller !== file.user) {
      return yield* refuse(`the clone ${file.path} pushes as ${file.user}, the user it remembers, not as ${caller}`)
    }
    const user = file.role === "clone" ? file.user : caller
    if (file.role === "served" && (yield* (yield* Repository).user(user)) === undefined) {
      return yield* refuse(`no user ${user} in the served repository ${file.path}`)
    }
    return user
  })
