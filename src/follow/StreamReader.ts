// Whether the viewer a stream token names may still read the run, asked of the served repository
// itself: the stream server asks when a connection opens and again every so often while it
// streams, so a viewer whose read right is taken away (their capabilities changed, the user
// removed, or what they held through nobody or anonymous withdrawn) stops following within that
// period. The capabilities the page signed are what Fossil gave at the time; they are never
// taken as still true.

import { fullcap, grants } from "../fossil/Fullcap.js"
import { openDatabase } from "../fossil/Sqlite.js"
import type { RunSummary } from "../runs/RunStates.js"

type Row = { readonly login: string; readonly cap: string | null }

/**
 * The viewer's capabilities in the repository now, as Fossil's login computes them
 * (login_set_anon_nobody_capabilities): everyone has nobody's; a signed-in user their own,
 * anonymous's and nobody's, with what reader and developer pass on (fullcap). Undefined: the
 * repository has no such user any more.
 */
export const readerCapabilities = (repository: string, user: string | undefined): string | undefined => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    const login = user === undefined || user === "" ? "nobody" : user
    const rows = db.prepare<[string], Row>(
      "SELECT login, cap FROM user WHERE login IN (?, 'nobody', 'anonymous', 'reader', 'developer')"
    ).all(login)
    const cap = (name: string) => rows.find((r) => r.login === name)?.cap ?? ""
    const special = { nobody: cap("nobody"), anonymous: cap("anonymous"), reader: cap("reader"), developer: cap("developer") }
    // not signed in: nobody's letters alone (anonymous's are for those who sign in)
    if (login === "nobody") return fullcap(special.nobody, { ...special, anonymous: "" })
    if (!rows.some((r) => r.login === login)) return undefined
    return fullcap(cap(login), special)
  } finally {
    db.close()
  }
}

/** The letters reading the run takes: forum posts Read Forum (2), tickets Read Ticket (r), a private one x too. */
export const mayReadWith = (capabilities: string, run: Pick<RunSummary, "place" | "private">): boolean =>
  grants(capabilities, run.place._tag === "Ticket" ? "r" : "2") && (!run.private || grants(capabilities, "x"))

/** Why the viewer may not read the run now, in the words a stream ends with; undefined when they may. */
export const readerRefusal = (repository: string, user: string | undefined, run: Pick<RunSummary, "place" | "private">): string | undefined => {
  const capabilities = readerCapabilities(repository, user)
  if (capabilities === undefined) return `the user ${user} is no longer in the repository`
  if (mayReadWith(capabilities, run)) return undefined
  return run.place._tag === "Ticket"
    ? `${user ?? "nobody"} may not read tickets here (Read Ticket, r)${run.private ? " or private artifacts (x)" : ""}`
    : `${user ?? "nobody"} may not read forum posts here (Read Forum, 2)${run.private ? " or private artifacts (x)" : ""}`
}
