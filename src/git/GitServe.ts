// The git program of the extension root (seed 001, "Fetch the git export"): the served
// repository's git export, read-only over git's smart HTTP, through git's own http-backend.
// Fossil has authenticated the viewer (FOSSIL_USER, FOSSIL_CAPABILITIES) and names the repository
// the URL serves (FOSSIL_REPOSITORY); this program only decides what may reach http-backend:
// fetches of that repository's export by a viewer who may read code, never a push, and never a
// request over 50 MB, as sent or once expanded. Plain Node: it starts on every request of a fetch.

import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import { openDatabase } from "../fossil/Sqlite.js"
import { exportMirrorOf } from "./ExportFiles.js"

/** The most a request may carry, as sent and once expanded. */
export const requestBound = 50 * 1024 * 1024

export interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

const refusal = (status: number, text: string, headers: Readonly<Record<string, string>> = {}): Reply => ({
  status, headers: { "Content-Type": "text/plain; charset=utf-8", ...headers }, body: `${text}\n`
})

/** The served Fossil repository's URL, as the request reached its extension root (BASE/ext/git/...). */
const fossilUrlOf = (env: NodeJS.ProcessEnv): string | undefined => {
  const host = env["HTTP_HOST"]
  if (host === undefined || host === "") return undefined
  const https = (env["HTTPS"] ?? "").toLowerCase() === "on" || env["REQUEST_SCHEME"] === "https"
  const top = (env["SCRIPT_NAME"] ?? "").replace(/\/ext(?:\/.*)?$/, "")
  return `${https ? "https" : "http"}://${host}${top}`
}

/** What a push is told: the export is read-only, and where to push instead. */
const readOnly = (env: NodeJS.ProcessEnv): string => {
  const url = fossilUrlOf(env)
  return `this git export is read-only: push to the Fossil repository instead (${url === undefined ? "fossil push" : `fossil push ${url}`}, or fossil commit in a checkout of it)`
}

/** One pkt-line of git's protocol: four hex digits of its length, then the line. */
export const pktLine = (text: string): string => `${(Buffer.byteLength(text) + 4).toString(16).padStart(4, "0")}${text}`

/**
 * A push refused in git's own words: git's smart HTTP has a server speak to the user by an `ERR`
 * pkt-line, which git prints as "fatal: remote error: ..." (or "remote: ..."), where a status of
 * 403 shows only "The requested URL returned error: 403" (Fossil puts a failed extension's text in
 * its skin, which git never shows). For info/refs, the advertisement's service line first, as git
 * expects of a smart server; for the POST (a client that skipped info/refs), the result alone.
 */
const pushRefused = (env: NodeJS.ProcessEnv, what: "advertisement" | "result"): Reply => ({
  status: 200,
  headers: { "Content-Type": `application/x-git-receive-pack-${what}`, "Cache-Control": "no-cache" },
  body: what === "advertisement"
    ? `${pktLine("# service=git-receive-pack\n")}0000${pktLine(`ERR ${readOnly(env)}\n`)}`
    : pktLine(`ERR ${readOnly(env)}\n`)
})

/** Why a request takes this route, or the route: info/refs, the upload-pack exchange, or a file of the dumb protocol. */
export type Route =
  | { readonly _tag: "Route"; readonly name: string; readonly rest: string }
  | { readonly _tag: "Refused"; readonly reply: Reply }

const mayRead = (capabilities: string): boolean => /[oas]/.test(capabilities)

/** Which export the URL names and what of it, or why it is refused; decided before anything is read. */
export const route = (env: NodeJS.ProcessEnv): Route => {
  const method = env["REQUEST_METHOD"] ?? "GET"
  const pathInfo = env["PATH_INFO"] ?? ""
  const query = env["QUERY_STRING"] ?? ""
  let decoded: string
  try {
    decoded = decodeURIComponent(`${pathInfo}?${query}`)
  } catch {
    return { _tag: "Refused", reply: refusal(400, "the URL is not well formed") }
  }
  const m = /^\/([A-Za-z0-9._-]+)\.git(\/.*)?$/.exec(pathInfo)
  // git push's own two requests are answered as git's smart HTTP lets a server speak to the user,
  // so git prints why and what to do instead ("remote error: ..."), not a bare 403
  const service = new URLSearchParams(query).get("service")
  if (m !== null && m[2] === "/info/refs" && (method === "GET" || method === "HEAD") && service === "git-receive-pack") {
    return { _tag: "Refused", reply: pushRefused(env, "advertisement") }
  }
  if (m !== null && m[2] === "/git-receive-pack" && method === "POST") return { _tag: "Refused", reply: pushRefused(env, "result") }
  // a push by any other route: a dumb-HTTP (WebDAV) one, or another method
  if (/receive-pack/i.test(decoded) || !["GET", "HEAD", "POST"].includes(method)) {
    return { _tag: "Refused", reply: refusal(403, `${readOnly(env)}; git fetch and git clone are served here`) }
  }
  if (m === null || m[1]!.startsWith(".")) {
    return { _tag: "Refused", reply: refusal(404, "not a git export: fetch NAME.git, such as git clone BASE/ext/git/NAME.git") }
  }
  const rest = m[2] ?? "/"
  const allowed =
    (rest === "/info/refs" && (method === "GET" || method === "HEAD") && (service === null || service === "git-upload-pack")) ||
    (rest === "/git-upload-pack" && method === "POST") ||
    ((method === "GET" || method === "HEAD") && /^\/(?:HEAD|objects\/(?:info\/(?:packs|alternates|http-alternates)|[0-9a-f]{2}\/[0-9a-f]{38,62}|pack\/pack-[0-9a-f]{40,64}\.(?:pack|idx)))$/.test(rest))
  if (!allowed) return { _tag: "Refused", reply: refusal(403, `${method} ${rest} is not served: this git export serves git fetch (upload-pack) only`) }
  return { _tag: "Route", name: m[1]!, rest }
}

/** The served repository's name in URLs: its file's name without its extension. */
export const servedName = (repository: string): string => Path.parse(repository).name

/** The request's body, refused past the bound as sent or, gzipped (git gzips large fetch requests), once expanded. */
export const readBody = async (input: NodeJS.ReadableStream, env: NodeJS.ProcessEnv): Promise<Buffer | Reply> => {
  const declared = Number(env["CONTENT_LENGTH"] ?? "0")
  if (Number.isFinite(declared) && declared > requestBound) {
    return refusal(413, `the request is ${declared} bytes, over the ${requestBound} bytes a fetch may send`)
  }
  // Fossil gives a CGI program the body on standard input but does not close it: read what
  // CONTENT_LENGTH says, and to the end only where it says nothing
  const expected = Number.isFinite(declared) && declared > 0 ? declared : undefined
  const chunks: Array<Buffer> = []
  let size = 0
  if (expected !== undefined || env["CONTENT_LENGTH"] === undefined) {
    for await (const chunk of input) {
      const buffer = typeof chunk === "string" ? Buffer.from(chunk) : chunk
      size += buffer.length
      if (size > requestBound) return refusal(413, `the request is over the ${requestBound} bytes a fetch may send`)
      chunks.push(buffer)
      if (expected !== undefined && size >= expected) break
    }
  }
  const body = Buffer.concat(chunks).subarray(0, expected ?? size)
  const gzipped = /gzip/i.test(env["HTTP_CONTENT_ENCODING"] ?? "") || (body.length >= 2 && body[0] === 0x1f && body[1] === 0x8b)
  if (!gzipped) return body
  try {
    return Zlib.gunzipSync(body, { maxOutputLength: requestBound })
  } catch (e) {
    const code = (e as { code?: string }).code
    return code === "ERR_BUFFER_TOO_LARGE"
      ? refusal(413, `the request expands past the ${requestBound} bytes a fetch may send`)
      : refusal(400, `the request's gzip body cannot be read: ${(e as Error).message}`)
  }
}

/** The git directory of the export that `fossil git export` last wrote for this repository. */
const exportOf = (repository: string): string | undefined => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  let mirror: string | undefined
  try {
    mirror = exportMirrorOf(db)
  } finally {
    db.close()
  }
  if (mirror === undefined) return undefined
  const absolute = Path.resolve(Path.dirname(repository), mirror)
  try {
    const real = Fs.realpathSync(absolute)
    const dotGit = Path.join(real, ".git")
    return Fs.existsSync(dotGit) ? Fs.realpathSync(dotGit) : Fs.existsSync(Path.join(real, "objects")) ? real : undefined
  } catch {
    return undefined
  }
}

const defaultPath = "/usr/local/bin:/usr/bin:/bin"

/** The environment http-backend sees: the request's CGI variables it reads, the export as its one project, no push. */
const backendEnv = (env: NodeJS.ProcessEnv, gitDir: string, rest: string, length: number | undefined): NodeJS.ProcessEnv => {
  const passed = ["REQUEST_METHOD", "QUERY_STRING", "CONTENT_TYPE", "REMOTE_ADDR", "REMOTE_USER", "SERVER_PROTOCOL", "HTTP_GIT_PROTOCOL"]
  const out: NodeJS.ProcessEnv = {}
  for (const name of passed) if (env[name] !== undefined) out[name] = env[name]
  return {
    ...out,
    PATH: env["PATH"] ?? defaultPath,
    HOME: Path.dirname(gitDir),
    GIT_PROJECT_ROOT: Path.dirname(gitDir),
    PATH_INFO: `/${Path.basename(gitDir)}${rest}`,
    GIT_HTTP_EXPORT_ALL: "1",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    // a push is refused before http-backend; it is off there too
    GIT_CONFIG_COUNT: "3",
    GIT_CONFIG_KEY_0: "http.receivepack",
    GIT_CONFIG_VALUE_0: "false",
    GIT_CONFIG_KEY_1: "http.uploadpack",
    GIT_CONFIG_VALUE_1: "true",
    GIT_CONFIG_KEY_2: "safe.directory",
    GIT_CONFIG_VALUE_2: "*",
    ...(length !== undefined ? { CONTENT_LENGTH: String(length) } : {})
  }
}

const gitProgram = (env: NodeJS.ProcessEnv): string => {
  for (const dir of (env["PATH"] ?? defaultPath).split(":")) {
    const candidate = Path.join(dir, "git")
    if (dir !== "" && Fs.existsSync(candidate)) return candidate
  }
  return "git"
}

export const writeReply = (output: NodeJS.WritableStream, reply: Reply): void => {
  const lines = [`Status: ${reply.status} ${statusText[reply.status] ?? ""}`.trim(), ...Object.entries(reply.headers).map(([k, v]) => `${k}: ${v}`)]
  output.write(`${lines.join("\r\n")}\r\n\r\n${reply.body}`)
}

const statusText: Record<number, string> = {
  200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 413: "Content Too Large", 500: "Internal Server Error"
}

/** One request, answered on `output`; resolves when the answer is written. */
export const serveGit = async (env: NodeJS.ProcessEnv, input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Promise<void> => {
  const routed = route(env)
  if (routed._tag === "Refused") return writeReply(output, routed.reply)
  const repositoryVar = env["FOSSIL_REPOSITORY"]
  if (repositoryVar === undefined || repositoryVar === "") {
    return writeReply(output, refusal(500, "no FOSSIL_REPOSITORY: this program is served from a Fossil server's extension root"))
  }
  const repository = Path.resolve(repositoryVar)
  const name = servedName(repository)
  // the repository this URL serves, never another's
  if (routed.name !== name) return writeReply(output, refusal(404, `no git export ${routed.name}.git here: this URL serves ${name}.git`))
  if (!mayRead(env["FOSSIL_CAPABILITIES"] ?? "")) {
    const who = env["FOSSIL_USER"]
    // 403, not 401: Fossil signs a viewer in by its login cookie, never by HTTP Basic credentials git would send
    return writeReply(output, who === undefined || who === ""
      ? refusal(403, `${name}.git needs Fossil's Read capability (o), which nobody has here: sign in (git -c http.extraHeader="Cookie: ...")`)
      : refusal(403, `${who} may not read the code of ${name} (Fossil's Read capability, o)`))
  }
  const gitDir = exportOf(repository)
  if (gitDir === undefined) return writeReply(output, refusal(404, `${name} has no git export yet (ocx2 export --mirror DIR makes one)`))
  let body: Buffer | undefined
  if ((env["REQUEST_METHOD"] ?? "GET") === "POST") {
    const read = await readBody(input, env)
    if (!Buffer.isBuffer(read)) return writeReply(output, read)
    body = read
  }
  await new Promise<void>((resolve) => {
    const child = ChildProcess.spawn(gitProgram(env), ["http-backend"], {
      cwd: gitDir,
      env: backendEnv(env, gitDir, routed.rest, body?.length),
      stdio: ["pipe", "pipe", "pipe"]
    })
    let sent = false
    let err = ""
    child.stderr!.on("data", (chunk: Buffer) => (err = (err + chunk.toString()).slice(-4096)))
    child.stdout!.on("data", (chunk: Buffer) => {
      sent = true
      output.write(chunk)
    })
    child.once("error", (e) => {
      if (!sent) writeReply(output, refusal(500, `git http-backend cannot be run: ${e.message}`))
      resolve()
    })
    child.once("close", (code) => {
      if (!sent) writeReply(output, refusal(500, `git http-backend ended ${code}: ${err.trim()}`))
      resolve()
    })
    child.stdin!.on("error", () => {})
    child.stdin!.end(body ?? Buffer.alloc(0))
  })
}
