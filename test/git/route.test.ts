import { Readable } from "node:stream"
import * as Zlib from "node:zlib"
import { describe, expect, it } from "vitest"
import { pktLine, readBody, requestBound, route, servedName } from "../../src/git/GitServe.js"

// What the git program lets through to git http-backend, decided before anything is read.

const routed = (method: string, pathInfo: string, query = "") => route({ REQUEST_METHOD: method, PATH_INFO: pathInfo, QUERY_STRING: query })
const status = (r: ReturnType<typeof route>) => (r._tag === "Refused" ? r.reply.status : 200)

describe("the git program's routes", () => {
  it("lets through upload-pack and the dumb protocol's files, naming the export", () => {
    expect(routed("GET", "/served.git/info/refs", "service=git-upload-pack")).toEqual({ _tag: "Route", name: "served", rest: "/info/refs" })
    expect(routed("POST", "/served.git/git-upload-pack")).toEqual({ _tag: "Route", name: "served", rest: "/git-upload-pack" })
    expect(status(routed("GET", "/served.git/info/refs"))).toBe(200)
    expect(status(routed("GET", "/served.git/HEAD"))).toBe(200)
    expect(status(routed("GET", "/served.git/objects/info/packs"))).toBe(200)
    expect(status(routed("GET", `/served.git/objects/ab/${"c".repeat(38)}`))).toBe(200)
    expect(status(routed("GET", `/served.git/objects/pack/pack-${"d".repeat(40)}.pack`))).toBe(200)
  })

  it("refuses git push's own requests in git's protocol, naming where to push instead", () => {
    const env = { HTTP_HOST: "fossil.example.org:8080", SCRIPT_NAME: "/top/ext/git" }
    const advertised = route({ ...env, REQUEST_METHOD: "GET", PATH_INFO: "/served.git/info/refs", QUERY_STRING: "service=git-receive-pack" })
    const told = "ERR this git export is read-only: push to the Fossil repository instead (fossil push http://fossil.example.org:8080/top, or fossil commit in a checkout of it)\n"
    expect(advertised._tag === "Refused" && advertised.reply).toEqual({
      status: 200,
      headers: { "Content-Type": "application/x-git-receive-pack-advertisement", "Cache-Control": "no-cache" },
      body: `001f# service=git-receive-pack\n0000${pktLine(told)}`
    })
    const posted = route({ ...env, REQUEST_METHOD: "POST", PATH_INFO: "/served.git/git-receive-pack" })
    expect(posted._tag === "Refused" && posted.reply).toMatchObject({ status: 200, body: pktLine(told) })
    expect(pktLine("ERR x\n")).toBe("000aERR x\n")
  })

  it("refuses a push by any route, and every other method or file", () => {
    expect(routed("GET", "/served.git/info/refs", "service=git%2Dreceive%2Dpack")).toMatchObject({ _tag: "Refused", reply: { status: 200 } })
    expect(status(routed("POST", "/served.git/info/refs", "service=git-receive-pack"))).toBe(403)
    expect(status(routed("GET", "/served.git/git-receive-pack"))).toBe(403)
    expect(status(routed("POST", "/served.git/info/refs", "service=git-upload-pack"))).toBe(403)
    expect(status(routed("GET", "/served.git/git-upload-pack"))).toBe(403)
    for (const method of ["PUT", "MKCOL", "DELETE", "PROPFIND", "LOCK", "MOVE"]) expect(status(routed(method, "/served.git/HEAD")), method).toBe(403)
    expect(status(routed("GET", "/served.git/config"))).toBe(403)
    expect(status(routed("GET", "/served.git/hooks/post-update"))).toBe(403)
    expect(status(routed("GET", "/served.git/objects/../config"))).toBe(403)
  })

  it("answers 404 for a URL that names no export", () => {
    for (const path of ["", "/", "/served", "/served.git.git/x/info/refs", "/../served.git/info/refs", "/.git/info/refs", "/a/b.git/info/refs"]) {
      expect(status(routed("GET", path)), path).toBe(path === "/served.git.git/x/info/refs" ? 403 : 404)
    }
  })

  it("names a repository by its file's name without its extension", () => {
    expect(servedName("/var/lib/fossil/served.fossil")).toBe("served")
    expect(servedName("/var/lib/fossil/a.b.fossil")).toBe("a.b")
  })
})

describe("the request's body", () => {
  const body = (bytes: Buffer, env: NodeJS.ProcessEnv = { CONTENT_LENGTH: String(bytes.length) }) => readBody(Readable.from([bytes]), env)

  it("reads what CONTENT_LENGTH says, though the input stays open", async () => {
    const open = new Readable({ read() {} })
    open.push(Buffer.from("0009done\n"))
    expect((await readBody(open, { CONTENT_LENGTH: "9" })).toString()).toBe("0009done\n")
  })

  it("expands a gzipped body, and refuses one that expands past the bound", async () => {
    expect((await body(Zlib.gzipSync("0009done\n"))).toString()).toBe("0009done\n")
    const bomb = await body(Zlib.gzipSync(Buffer.alloc(requestBound + 1)))
    expect(Buffer.isBuffer(bomb) ? 200 : bomb.status).toBe(413)
  })

  it("refuses a body over the bound as declared and as sent", async () => {
    const declared = await readBody(Readable.from([]), { CONTENT_LENGTH: String(requestBound + 1) })
    expect(Buffer.isBuffer(declared) ? 200 : declared.status).toBe(413)
    const sent = await readBody(Readable.from([Buffer.alloc(requestBound), Buffer.alloc(1)]), {})
    expect(Buffer.isBuffer(sent) ? 200 : sent.status).toBe(413)
  })
})
