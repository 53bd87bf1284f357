// Who a request is signed in as, by Fossil's own login cookie, checked against the served
// repository's user table as Fossil checks it (login.c: login_check_credentials, login_find_user),
// so the fleet's listener needs no secret of its own: a clone's node sends the cookie Fossil's
// /login gave it. The cookie is named fossil-CODE (CODE: the first 16 digits of the login group's
// code, else the project's) and holds HASH/PROJECT/LOGIN; it is good while the user row holds that
// HASH in `cookie`, `cexpire` is still ahead, and the user has capabilities and a password. A cookie
// of a login group's other member (which Fossil would take over) and the anonymous login are not
// taken: such a caller is nobody, as one who is not signed in.

import type BetterSqlite3 from "better-sqlite3"
import * as Crypto from "node:crypto"
import { grants } from "../fossil/Fullcap.js"
import * as Read from "../fossil/Read.js"

/** The caller as the served repository sees them: their login (nobody when not signed in) and effective capabilities. */
export interface Caller {
  readonly login: string
  readonly capabilities: string
}

/** The name of the repository's login cookie. */
export const loginCookieName = (db: BetterSqlite3.Database): string | undefined =>
  Read.stmt<[], { name: string }>(db,
    "SELECT 'fossil-' || substr(value, 1, 16) AS name FROM config WHERE name IN ('project-code', 'login-group-code') ORDER BY name"
  ).get()?.name

const cookieValue = (header: string | undefined, name: string): string | undefined => {
  if (header === undefined) return undefined
  for (const part of header.split(";")) {
    const at = part.indexOf("=")
    if (at > 0 && part.slice(0, at).trim() === name) {
      try {
        return decodeURIComponent(part.slice(at + 1).trim())
      } catch {
        return undefined
      }
    }
  }
  return undefined
}

const sameSecret = (a: string, b: string) => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && Crypto.timingSafeEqual(x, y)
}

/** The login a Cookie header signs in as, on this repository; undefined when it signs in nobody. */
export const signedInLogin = (db: BetterSqlite3.Database, cookieHeader: string | undefined): string | undefined => {
  const name = loginCookieName(db)
  if (name === undefined) return undefined
  const value = cookieValue(cookieHeader, name)
  if (value === undefined) return undefined
  const first = value.indexOf("/")
  const second = first < 0 ? -1 : value.indexOf("/", first + 1)
  if (first <= 0 || second < 0) return undefined
  const hash = value.slice(0, first)
  const login = value.slice(second + 1)
  if (login === "" || login === "anonymous" || login === "nobody") return undefined
  const row = Read.stmt<[string], { cookie: string | null }>(db,
    "SELECT cookie FROM user WHERE login = ? AND cexpire > julianday('now') AND length(cap) > 0 AND length(pw) > 0"
  ).get(login)
  return row?.cookie != null && sameSecret(row.cookie, hash) ? login : undefined
}

/** The caller a Cookie header makes, with their effective capabilities (nobody's when not signed in). */
export const callerOf = (db: BetterSqlite3.Database, cookieHeader: string | undefined): Caller => {
  const login = signedInLogin(db, cookieHeader)
  const user = login === undefined ? undefined : Read.user(db, login)
  if (login !== undefined && user !== undefined) return { login, capabilities: user.fullcap }
  return { login: "nobody", capabilities: Read.user(db, "nobody")?.fullcap ?? "" }
}

/** Whether the caller may be told what the served repository received (Read, `o`). */
export const mayRead = (caller: Caller): boolean => grants(caller.capabilities, "o")
