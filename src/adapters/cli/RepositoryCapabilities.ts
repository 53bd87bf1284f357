// Loaded only when a repository is named: opening a repository costs the native SQLite addon.

import * as Effect from "effect/Effect"
import * as Read from "../../fossil/Read.js"
import { openDatabase } from "../../fossil/Sqlite.js"

/** The user's effective capabilities (fullcap) in the repository, "" when it cannot be read. */
export const capabilitiesOf = (repository: string, user: string): Effect.Effect<string> =>
  Effect.map(identityIn(repository, user, undefined), (identity) => identity.capabilities)

export interface RepositoryIdentity {
  /** the user who acts: the one named, else the one a clone remembers, else the account's */
  readonly user: string | undefined
  /** that user's fullcap in the repository; "" when the repository cannot be read or has no such user */
  readonly capabilities: string
  /** why the repository could not be read, naming it; absent when it was read */
  readonly unreadable?: string
  /**
   * The user named is not one of the served repository's: said, since acting as nobody would only
   * show nothing (no runs, no capabilities) without a word. A clone's user table is not the
   * server's, so a clone never says it.
   */
  readonly unknownUser?: string
}

const unreadable = (repository: string, error: unknown): string => {
  const message = error instanceof Error ? error.message : String(error)
  return /not a database|no such table/i.test(message)
    ? `${repository} is not a Fossil repository (${message})`
    : `the repository file ${repository} cannot be read: ${message}`
}

/** The user a clone remembers: the user of its last-sync-url, which `fossil clone` sets. */
const rememberedUser = (db: ReturnType<typeof openDatabase>): string | undefined => {
  const row = db.prepare<[], { value: unknown }>("SELECT value FROM config WHERE name = 'last-sync-url'").get()
  if (row === undefined || row.value === null) return undefined
  try {
    const user = decodeURIComponent(new URL(String(row.value)).username)
    return user === "" ? undefined : user
  } catch {
    return undefined
  }
}

/**
 * Who acts on `repository`, and what Fossil lets them do there. The capabilities are only ever
 * read from the repository itself, never taken from the caller.
 */
export const identityIn = (repository: string, named: string | undefined, account: string | undefined): Effect.Effect<RepositoryIdentity> =>
  Effect.sync((): RepositoryIdentity => {
    let db: ReturnType<typeof openDatabase>
    try {
      db = openDatabase(repository, { readonly: true, fileMustExist: true })
    } catch (e) {
      return { user: named ?? account, capabilities: "", unreadable: unreadable(repository, e) }
    }
    try {
      const remembered = rememberedUser(db)
      const user = named ?? remembered ?? account
      const found = user === undefined ? undefined : Read.user(db, user)
      const unknown = named !== undefined && remembered === undefined && found === undefined
        ? `no user ${named} in the repository ${repository}: the user to act as (--user, OCX_USER for MCP) is one of its Fossil users (fossil user list -R ${repository})`
        : undefined
      return { user, capabilities: found?.fullcap ?? "", ...(unknown !== undefined ? { unknownUser: unknown } : {}) }
    } catch (e) {
      return { user: named ?? account, capabilities: "", unreadable: unreadable(repository, e) }
    } finally {
      db.close()
    }
  })
