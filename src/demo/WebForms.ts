/**
 * A person at a Fossil server's web forms: signed in, posting threads, replies, edits and tickets
 * as the forms take them (with their CSRF token and Referer), as the demo posts its runs and the
 * tests post theirs.
 */
import { openDatabase } from "../fossil/Sqlite.js"

export interface WebSession {
  readonly url: string
  readonly user: string
  readonly cookie: string
}

export const webLogin = async (url: string, user: string, password: string): Promise<WebSession> => {
  const res = await fetch(url + "login", {
    method: "POST",
    redirect: "manual",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Referer: url + "login" },
    body: new URLSearchParams({ u: user, p: password, in: "Login" }).toString()
  })
  await res.arrayBuffer()
  const cookie = (res.headers.getSetCookie?.() ?? []).map((c) => c.split(";")[0]!).find((c) => c.startsWith("fossil-"))
  if (cookie === undefined) throw new Error(`login of ${user} at ${url} failed (HTTP ${res.status})`)
  return { url, user, cookie }
}

const csrfOf = async (s: WebSession, page: string): Promise<string | undefined> => {
  const res = await fetch(s.url + page, { headers: { Cookie: s.cookie } })
  const html = await res.text()
  return /name="csrf" value="([^"]*)"/.exec(html)?.[1]
}

/** A form posted as a person; a write the server refused because others held the database is posted again. */
const formPost = async (s: WebSession, page: string, fields: Record<string, string>, formPage = page) => {
  for (let attempt = 1; ; attempt++) {
    const r = await formPostOnce(s, page, fields, formPage)
    if (!(r.status >= 400 && /database is locked/i.test(r.body)) || attempt === 5) return r
    await new Promise((resolve) => setTimeout(resolve, 200 * attempt))
  }
}

const formPostOnce = async (s: WebSession, page: string, fields: Record<string, string>, formPage: string) => {
  const csrf = await csrfOf(s, formPage)
  const res = await fetch(s.url + page, {
    method: "POST",
    redirect: "manual",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Cookie: s.cookie, Referer: s.url + page },
    body: new URLSearchParams({ ...fields, ...(csrf === undefined ? {} : { csrf }) }).toString()
  })
  const body = await res.text()
  return { status: res.status, location: res.headers.get("location") ?? "", body }
}

/** The full hash of the one artifact whose hash starts with `prefix`. */
export const fullHash = (repository: string, prefix: string): string => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    const rows = db.prepare<[string], { uuid: string }>("SELECT uuid FROM blob WHERE uuid GLOB ? || '*'").all(prefix)
    if (rows.length !== 1) throw new Error(`${rows.length} artifacts start with ${prefix}`)
    return rows[0]!.uuid
  } finally {
    db.close()
  }
}

const postedHash = (server: { repository: string }, r: { status: number; location: string; body: string }, what: string) => {
  const m = /\/forumpost\/([0-9a-f]+)/.exec(r.location)
  if (r.status !== 302 || m === null) throw new Error(`${what}: HTTP ${r.status}, Location "${r.location}": ${r.body.replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").slice(0, 300)}`)
  return fullHash(server.repository, m[1]!)
}

/** A new thread through /forume1, as the person signed in. Returns the post's full hash. */
export const webNewThread = async (
  server: { repository: string },
  s: WebSession,
  post: { readonly title: string; readonly text: string; readonly mimetype?: string }
): Promise<string> =>
  postedHash(server, await formPost(s, "forume1", {
    title: post.title, mimetype: post.mimetype ?? "text/x-markdown", content: post.text, submit: "1"
  }), `new thread by ${s.user}`)

/**
 * A person's post through a form, tried once: a refusal (such as "database is locked") is returned
 * as it came, for tests that must see whether a person's post fails.
 */
export const webPostOnce = (s: WebSession, page: string, fields: Record<string, string>, formPage = page) =>
  formPostOnce(s, page, fields, formPage)

/** A reply through /forume2 tried once, not again on "database is locked": its HTTP answer, and its full hash when it was stored. */
export const webReplyOnce = async (
  server: { repository: string },
  s: WebSession,
  reply: { readonly to: string; readonly text: string; readonly mimetype?: string }
): Promise<{ readonly status: number; readonly body: string; readonly hash: string | undefined }> => {
  const r = await formPostOnce(s, "forume2", {
    fpid: reply.to, reply: "1", mimetype: reply.mimetype ?? "text/x-markdown", content: reply.text, submit: "1"
  }, "forume2")
  const m = /\/forumpost\/([0-9a-f]+)/.exec(r.location)
  return { status: r.status, body: r.body, hash: r.status === 302 && m !== null ? fullHash(server.repository, m[1]!) : undefined }
}

/** A reply through /forume2 to the post `to` (full hash). */
export const webReply = async (
  server: { repository: string },
  s: WebSession,
  reply: { readonly to: string; readonly text: string; readonly mimetype?: string }
): Promise<string> =>
  postedHash(server, await formPost(s, "forume2", {
    fpid: reply.to, reply: "1", mimetype: reply.mimetype ?? "text/x-markdown", content: reply.text, submit: "1"
  }), `reply by ${s.user}`)

/** An edit through /forume2 of the post `of`. */
export const webEdit = async (
  server: { repository: string },
  s: WebSession,
  edit: { readonly of: string; readonly text: string; readonly title?: string }
): Promise<string> =>
  postedHash(server, await formPost(s, "forume2", {
    fpid: edit.of, edit: "1", mimetype: "text/x-markdown", content: edit.text, submit: "1",
    ...(edit.title === undefined ? {} : { title: edit.title })
  }), `edit by ${s.user}`)

/** A new ticket through /tktnew. Returns the ticket id. */
export const webNewTicket = async (
  s: WebSession,
  t: { readonly title: string; readonly icomment: string }
): Promise<string> => {
  const r = await formPost(s, "tktnew", {
    title: t.title, type: "Code_Defect", severity: "Critical", mutype: "Plain Text", icomment: t.icomment, submit: "Submit"
  })
  const m = /\/tktview\/([0-9a-f]+)/.exec(r.location)
  if (r.status !== 302 || m === null) throw new Error(`new ticket by ${s.user}: HTTP ${r.status} ${r.body.slice(0, 200)}`)
  return m[1]!
}

/** A change to a ticket through /tktedit, appending icomment. */
export const webEditTicket = async (s: WebSession, t: { readonly ticket: string; readonly icomment: string }): Promise<void> => {
  const r = await formPost(s, "tktedit", { name: t.ticket, mutype: "Plain Text", icomment: t.icomment, submit: "Submit" },
    `tktedit?name=${t.ticket}`)
  if (r.status !== 302) throw new Error(`ticket edit by ${s.user}: HTTP ${r.status} ${r.body.slice(0, 200)}`)
}

export const webPage = async (url: string, session?: WebSession): Promise<{ status: number; text: string }> => {
  const res = await fetch(url, { headers: session === undefined ? {} : { Cookie: session.cookie } })
  return { status: res.status, text: await res.text() }
}
