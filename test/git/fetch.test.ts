import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runFossil } from "../../src/fossil/Command.js"
import type { HookLogEntry } from "../../src/root/HookFiles.js"
import { gitExport } from "../../src/tools/export.js"
import { hook } from "../../src/tools/hook.js"
import { cloneAs, createRepository, fossil, webLogin, type WebSession } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"
import { closeHookWorld, waitFor } from "../node/hookWorld.js"
import { git, makeGitWorld, talker, type GitWorld } from "./gitWorld.js"

// git fetch over smart HTTP from the extension root's git program (the release's ocx2-git),
// against a real fossil server and real git: read-only, for viewers who may read code, bounded.

let world: GitWorld
let builder: WebSession
let lab: WebSession
let mine: string
beforeAll(async () => {
  world = await makeGitWorld()
  const exported = await world.call(gitExport, { mirror: world.mirror })
  expect(exported.stopped).toEqual({ reason: "completed" })
  expect((await world.call(hook, { root: world.root })).stopped).toEqual({ reason: "completed" })
  builder = await webLogin(world.server.url, users.builder.login, users.builder.password)
  lab = await webLogin(world.server.url, talker.login, talker.password)
  const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "alice.fossil"))
  mine = Path.join(world.dir, "alice-checkout")
  Fs.mkdirSync(mine)
  const opened = await runFossil(["open", clone], { user: "alice", cwd: mine })
  expect(opened.code, opened.stderr).toBe(0)
}, 90_000)
afterAll(() => closeHookWorld(world))

const as = (session: WebSession) => ["-c", `http.extraHeader=Cookie: ${session.cookie}`]
const exportHead = () => git(["rev-parse", "refs/heads/master"], { cwd: world.mirror }).stdout.trim()
const hookEntries = (): ReadonlyArray<HookLogEntry> => {
  const log = Path.join(world.root, "node", "hook.log")
  return Fs.existsSync(log) ? Fs.readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l) as HookLogEntry) : []
}

describe("git clone and fetch from the extension root", () => {
  it("clones the served repository's export for a viewer who may read code", async () => {
    const into = Path.join(world.dir, "cloned")
    git([...as(builder), "clone", "--quiet", world.gitUrl, into])
    expect(git(["log", "-1", "--format=%s"], { cwd: into }).stdout.trim()).toBe("the first check-in")
    expect(git(["rev-parse", "HEAD"], { cwd: into }).stdout.trim()).toBe(exportHead())
    expect(Fs.readFileSync(Path.join(into, "hello.txt"), "utf8")).toBe("hello from trunk\n")
  }, 120_000)

  it("a check-in pushed to Fossil is fetched over HTTP once the hook has run", async () => {
    const into = Path.join(world.dir, "cloned")
    await world.commitAndPush(mine, "fetched.txt", "fetched\n", "a check-in to fetch")
    const pushedAt = Date.now()
    const seen = await waitFor(() => {
      const remote = git([...as(builder), "ls-remote", world.gitUrl, "refs/heads/master"]).stdout.split(/\s/)[0]
      return remote === exportHead() && git(["log", "-1", "--format=%s", "refs/heads/master"], { cwd: world.mirror }).stdout.trim() === "a check-in to fetch"
        ? Date.now()
        : undefined
    }, 60_000, 50)
    expect(seen, `hook log: ${JSON.stringify(hookEntries().slice(-3))}`).toBeDefined()
    git([...as(builder), "pull", "--quiet", "--ff-only"], { cwd: into })
    expect(git(["log", "-1", "--format=%s"], { cwd: into }).stdout.trim()).toBe("a check-in to fetch")
    const hooked = hookEntries().find((e) => e.did.some((d) => d.startsWith("a check-in arrived after the git export")))
    expect(hooked).toBeDefined()
    // a figure, not an assertion: from the hook's start to the check-in fetchable over HTTP
    console.log(`fetchable ${seen! - Date.parse(hooked!.at)} ms after the hook started (${seen! - pushedAt} ms after the push returned)`)
  }, 90_000)

  it("refuses a push by any route, and the export is unchanged", async () => {
    const into = Path.join(world.dir, "cloned")
    const before = exportHead()
    Fs.writeFileSync(Path.join(into, "pushed-by-git.txt"), "no\n")
    git(["add", "pushed-by-git.txt"], { cwd: into })
    git(["-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "--quiet", "-m", "a git push"], { cwd: into })
    // git prints the refusal, naming where to push instead (issue 40: it showed only "403")
    const told = `remote error: this git export is read-only: push to the Fossil repository instead (fossil push ${world.server.url.replace(/\/$/, "")}, or fossil commit in a checkout of it)`
    const pushed = git([...as(builder), "push", "origin", "HEAD:refs/heads/master"], { cwd: into, allowFail: true })
    expect(pushed.code).not.toBe(0)
    expect(pushed.stderr).toContain(told)
    console.log(`git push printed:\n${pushed.stderr.trim()}`)
    const admin = await webLogin(world.server.url, users.admin.login, users.admin.password)
    const pushedAsAdmin = git([...as(admin), "push", "origin", "HEAD:refs/heads/other"], { cwd: into, allowFail: true })
    expect(pushedAsAdmin.code).not.toBe(0)
    expect(pushedAsAdmin.stderr).toContain(told)
    const anonymous = git(["push", world.gitUrl, "HEAD:refs/heads/other"], { cwd: into, allowFail: true })
    expect(anonymous.code).not.toBe(0)
    expect(anonymous.stderr).toContain(told)
    // git push's own two requests are answered in git's protocol, an ERR line that git prints
    for (const [method, suffix, type] of [
      ["GET", "/info/refs?service=git-receive-pack", "application/x-git-receive-pack-advertisement"],
      ["POST", "/git-receive-pack", "application/x-git-receive-pack-result"]
    ] as const) {
      const r = await fetch(world.gitUrl + suffix, { method, headers: { Cookie: admin.cookie }, ...(method === "GET" ? {} : { body: "0000" }) })
      expect(r.status, `${method} ${suffix}`).toBe(200)
      expect(r.headers.get("content-type")).toBe(type)
      expect(await r.text()).toMatch(/[0-9a-f]{4}ERR this git export is read-only: push to the Fossil repository instead/)
    }
    for (const [method, suffix] of [
      ["PUT", "/objects/aa/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"],
      ["POST", "/info/refs?service=git-upload-pack"],
      ["GET", "/git-receive-pack"]
    ] as const) {
      const r = await fetch(world.gitUrl + suffix, { method, headers: { Cookie: admin.cookie }, ...(method === "GET" ? {} : { body: "0000" }) })
      await r.arrayBuffer()
      // Fossil itself answers a PUT (a dumb-HTTP push) 501 before the program runs
      expect(method === "PUT" ? [403, 501] : [403], `${method} ${suffix}`).toContain(r.status)
    }
    expect(exportHead()).toBe(before)
    expect(git(["for-each-ref", "--format=%(refname)"], { cwd: world.mirror }).stdout.trim().split("\n")).toEqual(["refs/heads/master"])
  }, 120_000)

  it("refuses a viewer whose capabilities do not let them read code", async () => {
    const anonymous = await fetch(`${world.gitUrl}/info/refs?service=git-upload-pack`)
    expect(anonymous.status).toBe(403)
    expect(await anonymous.text()).toContain("Read capability (o), which nobody has here: sign in")
    const signedIn = await fetch(`${world.gitUrl}/info/refs?service=git-upload-pack`, { headers: { Cookie: lab.cookie } })
    expect(signedIn.status).toBe(403)
    expect(await signedIn.text()).toContain(`${talker.login} may not read the code of served`)
    const cloned = git([...as(lab), "clone", world.gitUrl, Path.join(world.dir, "lab-clone")], { allowFail: true })
    expect(cloned.code).not.toBe(0)
    expect(git(["clone", world.gitUrl, Path.join(world.dir, "anonymous-clone")], { allowFail: true }).code).not.toBe(0)
    expect(Fs.existsSync(Path.join(world.dir, "lab-clone", ".git", "packed-refs"))).toBe(false)
  }, 120_000)

  it("refuses a request over 50 MB, as sent and once expanded", async () => {
    const upload = `${world.gitUrl}/git-upload-pack`
    const headers = { Cookie: builder.cookie, "Content-Type": "application/x-git-upload-pack-request" }
    const raw = Buffer.alloc(50 * 1024 * 1024 + 1, 0x30)
    const tooBig = await fetch(upload, { method: "POST", headers, body: raw })
    const tooBigText = await tooBig.text()
    expect(tooBig.status, tooBigText.slice(0, 200)).toBe(413)
    const bomb = Zlib.gzipSync(Buffer.alloc(60 * 1024 * 1024, 0x30))
    expect(bomb.length).toBeLessThan(1024 * 1024)
    const expanded = await fetch(upload, { method: "POST", headers: { ...headers, "Content-Encoding": "gzip" }, body: bomb })
    const expandedText = await expanded.text()
    expect(expanded.status, expandedText.slice(0, 200)).toBe(413)
    expect(expandedText).toContain("expands past")
    // a fetch request git gzips (it does past a kilobyte of haves) is expanded and served
    const request = Zlib.gzipSync(`0032want ${exportHead()}\n00000009done\n`)
    const served = await fetch(upload, { method: "POST", headers: { ...headers, "Content-Encoding": "gzip" }, body: request })
    const pack = Buffer.from(await served.arrayBuffer())
    expect(served.status).toBe(200)
    expect(served.headers.get("content-type")).toBe("application/x-git-upload-pack-result")
    expect(pack.subarray(0, 8).toString()).toBe("0008NAK\n")
    expect(pack.includes("PACK")).toBe(true)
  }, 120_000)

  it("never serves another repository's export", async () => {
    // a second repository, not served, with an export of its own: the world serves one
    const other = await createRepository(Path.join(world.dir, "other.fossil"), [])
    await fossil(["git", "export", Path.join(world.dir, "other-mirror"), "-R", other])
    for (const name of ["other", "served.fossil", "Served", "..", "served.git/../other"]) {
      const r = await fetch(`${world.server.url}ext/git/${name}.git/info/refs?service=git-upload-pack`, { headers: { Cookie: builder.cookie } })
      await r.arrayBuffer()
      expect(r.status, name).not.toBe(200)
    }
    const r = await fetch(`${world.server.url}ext/git/other.git/info/refs?service=git-upload-pack`, { headers: { Cookie: builder.cookie } })
    expect(r.status).toBe(404)
    expect(await r.text()).toContain("no git export other.git here: this URL serves served.git")
  }, 120_000)
})
