// watch from a clone's host: the run's node is elsewhere, so ask the server. Signed in as the
// user the clone remembers (with the password Fossil keeps for its syncs), the command line asks
// the run's page for the run as JSON, which carries the node's stream server's address and a
// grant for this user, and then follows the same stream the page follows.

import { openDatabase } from "../fossil/Sqlite.js"
import type { WatchEventOut } from "./EventOut.js"

/** Fossil's unobscure(): the hex of a salt byte and the text, each byte XOR-ed with the salt and a fixed 16-byte pattern. */
const pattern = [0xa7, 0x21, 0x31, 0xe3, 0x2a, 0x50, 0x2c, 0x86, 0x4c, 0xa4, 0x52, 0x25, 0xff, 0x49, 0x35, 0x85]
export const unobscure = (text: string): string => {
  if (text.length < 2 || !/^[0-9a-fA-F]+$/.test(text) || text.length % 2 !== 0) return text
  const bytes = Buffer.from(text, "hex")
  const salt = bytes[0]!
  return Buffer.from(bytes.subarray(1).map((b, i) => b ^ pattern[i & 0x0f]! ^ salt)).toString("utf8")
}

/**
 * The password to sign in with: the one the clone keeps for its syncs (Fossil's last-sync-pw), while
 * it keeps it as given; once Fossil has synced it keeps only its hash (the shared secret of its
 * sync protocol, 40 hex digits), which Fossil's sign-in page does not take: then OCX_PASSWORD.
 */
export const signInPassword = (clone: string, env: NodeJS.ProcessEnv = process.env): { readonly password: string } | { readonly problem: string } => {
  const db = openDatabase(clone, { readonly: true, fileMustExist: true })
  let kept: string | undefined
  try {
    const row = db.prepare<[], { value: unknown }>("SELECT value FROM config WHERE name = 'last-sync-pw'").get()
    kept = row === undefined || row.value === null || row.value === "" ? undefined : unobscure(String(row.value))
  } finally {
    db.close()
  }
  if (kept !== undefined && !/^[0-9a-f]{40}$/.test(kept)) return { password: kept }
  const given = env.OCX_PASSWORD
  if (given !== undefined && given !== "") return { password: given }
  return {
    problem: `the clone ${clone} keeps ${kept === undefined ? "no password" : "only its sync hash of the password"}, which Fossil's sign-in page does not take: ` +
      "give the password in OCX_PASSWORD to follow the run through the server's run page"
  }
}

const signIn = async (server: URL, user: string, password: string): Promise<string> => {
  const response = await fetch(new URL("login", server), {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", referer: new URL("login", server).toString() },
    body: new URLSearchParams({ u: user, p: password, in: "Login" }).toString()
  })
  await response.arrayBuffer()
  const cookie = (response.headers.getSetCookie?.() ?? []).map((c) => c.split(";")[0]!).find((c) => c.startsWith("fossil-"))
  if (cookie === undefined) throw new Error(`${server} did not sign ${user} in with the password the clone keeps (HTTP ${response.status})`)
  return cookie
}

/**
 * What of the run page's answer (watch's output) following through the server reads; the caller
 * names the whole answer it expects (the page's JSON is taken as it comes).
 */
export interface PageAnswer {
  readonly events: ReadonlyArray<WatchEventOut>
  readonly over: boolean
  readonly offset: number
  readonly live?: { readonly url: string; readonly token: string } | undefined
}

interface Answer<A> { readonly stopped: { readonly reason: string; readonly message?: string }; readonly output?: A }

/** The run page's answer; with `after`, what came after that offset, the page holding it up to 3 s. */
const askPage = async <A extends PageAnswer>(server: URL, cookie: string, run: string, after?: number): Promise<A> => {
  const more = after === undefined ? "" : `&offset=${after}&seconds=3`
  const response = await fetch(new URL(`ext/ocx2-cgi/watch?run=${encodeURIComponent(run)}&format=json${more}`, server), { headers: { cookie } })
  let answer: Answer<A>
  try {
    answer = await response.json() as Answer<A>
  } catch {
    throw new Error(`${server}ext/ocx2-cgi/watch answered HTTP ${response.status} without the run's JSON: does the server serve the OCX pages there?`)
  }
  if (answer.output === undefined) throw new Error(`the server's run page refused: ${answer.stopped.message ?? answer.stopped.reason}`)
  return answer.output
}

/** Each server-sent event of a response body, as it arrives. */
async function* serverSentEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<{ readonly event: string; readonly data: string }> {
  const decoder = new TextDecoder()
  let buffered = ""
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true })
    for (let end = buffered.indexOf("\n\n"); end >= 0; end = buffered.indexOf("\n\n")) {
      const block = buffered.slice(0, end)
      buffered = buffered.slice(end + 2)
      let event = "message"
      const data: Array<string> = []
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7)
        else if (line.startsWith("data: ")) data.push(line.slice(6))
      }
      if (data.length > 0) yield { event, data: data.join("\n") }
    }
  }
}

/** Follows the run through its page alone, each answer going on from the offset of the one before, until it is over. */
const followThroughPage = async <A extends PageAnswer>(
  server: URL, cookie: string, run: string, page: A, emit: (event: WatchEventOut) => void, signal: AbortSignal | undefined
): Promise<A> => {
  let last = page
  let state = page.events.filter((e) => e.type === "state").at(-1)?.state
  while (!last.over && signal?.aborted !== true) {
    last = await askPage<A>(server, cookie, run, last.offset)
    for (const event of last.events) {
      // each answer starts with the state as it stands: given only when it changed
      if (event.type === "state" && event.state === state) continue
      if (event.type === "state") state = event.state
      emit(event)
    }
  }
  return last.over ? askPage<A>(server, cookie, run) : last
}

/**
 * Follows the run through the server's run page and the node's stream server, emitting its events
 * as they come; the answer is the run page's once it ended (or as it stood, when the page gives no
 * live stream: the run is over, or its node is not the server's host).
 */
export const followThroughServer = async <A extends PageAnswer>(
  clone: { readonly path: string; readonly url: string; readonly user: string },
  run: string,
  emit: (event: WatchEventOut) => void,
  signal?: AbortSignal
): Promise<A> => {
  const found = signInPassword(clone.path)
  if ("problem" in found) throw new Error(found.problem)
  const password = found.password
  const server = new URL(clone.url.endsWith("/") ? clone.url : `${clone.url}/`)
  const cookie = await signIn(server, clone.user, password)
  const page = await askPage<A>(server, cookie, run)
  for (const event of page.events) emit(event)
  if (page.live === undefined) return page
  const url = page.live.url.startsWith(":") ? `${server.protocol}//${server.hostname}${page.live.url}` : page.live.url
  let response: Response
  try {
    // the token in a header, not the URL: out of any proxy's access log
    response = await fetch(url, { headers: { authorization: `Bearer ${page.live.token}` }, ...(signal === undefined ? {} : { signal }) })
  } catch (e) {
    if (signal?.aborted === true) throw e
    // the stream server listens on the server's loopback unless its operator exposed it: the page, then
    return followThroughPage(server, cookie, run, page, emit, signal)
  }
  if (response.status !== 200 || response.body === null) throw new Error(`the node's stream server answered HTTP ${response.status}: ${await response.text()}`)
  let ended = false
  for await (const { event, data } of serverSentEvents(response.body)) {
    if (event === "offset") continue
    if (event === "refused") throw new Error(`the node's stream server stopped following: ${(JSON.parse(data) as { text?: string }).text ?? ""}`)
    const parsed = JSON.parse(data) as WatchEventOut
    // the page gave the state as it stood; the stream starts with it again
    if (event === "state" && parsed.state === page.events.find((e) => e.type === "state")?.state) continue
    emit(parsed)
    if (event === "end") {
      ended = true
      break
    }
  }
  const after = ended ? await askPage<A>(server, cookie, run) : page
  return after
}
