import BetterSqlite3 from "better-sqlite3"
import { chromium, type Browser, type Page } from "playwright-core"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as Http from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { builtProgram, bundle, startExtServer, type ExtServer, type TestUser } from "./extServer.js"

// The CGI's pages in a real headless Chromium against a real `fossil server`, as a person uses
// them: log in through Fossil's login page, open OCX, fill a form, submit, read the answer.

const alice: TestUser = { login: "alice", password: "alice-secret-1", capabilities: "s" }
// the node a run is for (holding nothing of its own), and the user its process runs as
const lab: TestUser = { login: "lab", password: "lab-secret-1", capabilities: "" }
const builder: TestUser = { login: "builder", password: "builder-secret-1", capabilities: "oi" }

/** Screenshots stay after the run, for a person to look at; the test prints where. */
const screenshots = join(tmpdir(), "ocx2-screenshots")

let server: ExtServer
let build: string
let browser: Browser

beforeAll(async () => {
  build = mkdtempSync(join(tmpdir(), "ocx2-browser-build-"))
  const cgiTest = await bundle(join(import.meta.dirname, "fixtures/ocx2-cgi-test.ts"), build, "ocx2-cgi-test")
  // the page program as the build ships it (dist, with its code cache), not bundled again here
  const cgi = await builtProgram("ocx2-cgi", build)
  server = await startExtServer([alice, lab, builder], { "ocx2-cgi": cgi, "ocx2-cgi-test": cgiTest })
  mkdirSync(screenshots, { recursive: true })
  // Playwright gives each launch a new empty profile directory of its own (--user-data-dir).
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"
    ]
  })
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(build, { recursive: true, force: true })
})

/** what the repository holds: anything it receives, and its forum posts */
const state = () => {
  const db = new BetterSqlite3(server.repository, { readonly: true })
  try {
    const hasForum = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'forumpost'").get() !== undefined
    return JSON.stringify({
      ...(db.prepare("SELECT (SELECT count(*) FROM blob) AS blobs, (SELECT coalesce(max(rcvid), 0) FROM rcvfrom) AS rcvid").get() as object),
      posts: hasForum ? (db.prepare("SELECT count(*) AS n FROM forumpost").get() as { n: number }).n : 0
    })
  } finally {
    db.close()
  }
}

const serverCode = () => {
  const db = new BetterSqlite3(server.repository, { readonly: true })
  try {
    return String((db.prepare("SELECT value FROM config WHERE name = 'server-code'").get() as { value: unknown }).value)
  } finally {
    db.close()
  }
}

const logIn = async (page: Page) => {
  await page.goto(`${server.base}/login`)
  await page.fill("input[name=u]", alice.login)
  await page.fill("input[name=p]", alice.password)
  await Promise.all([page.waitForNavigation(), page.click("input[name=in]")])
}

describe("the OCX pages in Chromium", () => {
  it("a person logs in, opens OCX, runs echo as a dry run and then for real", async () => {
    const context = await browser.newContext({ viewport: { width: 1024, height: 768 } })
    const page = await context.newPage()
    await logIn(page)
    await page.goto(`${server.base}/ext/ocx2-cgi`)
    expect(await page.locator("div.mainmenu").count()).toBe(1)
    expect(await page.locator("div.header .status").innerText()).toContain("alice")
    expect(await page.locator(".ocx").innerText()).toContain("You act as alice")
    // the landing page is the runs list (issue 40); the tools' list is one link away
    expect(await page.locator("table#ocx-runs").count()).toBe(1)
    await Promise.all([page.waitForNavigation(), page.click("a[href='/ext/ocx2-cgi/tools']")])
    expect(await page.locator(".ocx").innerText()).toContain("You act as alice")
    const ocxShot = join(screenshots, "ocx-page.png")
    await page.screenshot({ path: ocxShot, fullPage: true })

    await Promise.all([page.waitForNavigation(), page.click("a[href='/ext/ocx2-cgi/echo']")])
    expect(new URL(page.url()).pathname).toBe("/ext/ocx2-cgi/echo")
    await page.fill("#f-word", "hello <world>")
    await page.fill("#f-option", "opt")
    await page.check("#f-flag")
    await page.check("#f-dry_run")
    await Promise.all([page.waitForNavigation(), page.click("form.ocx-form button[type=submit]")])
    const dry = page.locator("#ocx-answer")
    expect(await dry.getAttribute("data-reason")).toBe("dry_run")
    expect(await dry.innerText()).toContain("Dry run: nothing was done")
    expect(await dry.locator(".ocx-output").innerText()).toContain("hello <world>")
    // the form comes back as it was sent, so the person can run it for real
    expect(await page.inputValue("#f-word")).toBe("hello <world>")
    expect(await page.isChecked("#f-dry_run")).toBe(true)

    await page.uncheck("#f-dry_run")
    await Promise.all([page.waitForNavigation(), page.click("form.ocx-form button[type=submit]")])
    const done = page.locator("#ocx-answer")
    expect(await done.getAttribute("data-reason")).toBe("completed")
    const json = JSON.parse(await done.locator("pre.ocx-json").textContent() ?? "")
    expect(json).toEqual({
      tool: "echo",
      operations: [],
      output: { word: "hello <world>", option: "opt", flag: true },
      stopped: { reason: "completed" }
    })
    const answerShot = join(screenshots, "echo-answer.png")
    await page.screenshot({ path: answerShot, fullPage: true })
    console.log(`screenshots: ${ocxShot} ${answerShot}`)
    await context.close()
  }, 90_000)

  it("a tool with an effect runs from its form for real; on a phone the page needs no sideways scroll", async () => {
    const context = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 })
    const page = await context.newPage()
    await logIn(page)
    await page.goto(`${server.base}/ext/ocx2-cgi-test/guarded`)
    await page.fill("#f-word", "from-the-phone")
    await page.selectOption("#f-color", "blue")
    await page.fill("#f-times", "3")
    await page.fill("#f-extra", `{"note": "a long value that should wrap rather than push the page sideways on a narrow screen"}`)
    await Promise.all([page.waitForNavigation(), page.click("form.ocx-form button[type=submit]")])
    expect(await page.locator("#ocx-answer").getAttribute("data-reason")).toBe("completed")
    // the did: lines are folded under "details" (issue 40): hidden until opened
    expect(await page.locator("#ocx-answer .ocx-operations").isVisible()).toBe(false)
    await page.click("#ocx-answer details.ocx-did > summary")
    expect(await page.locator("#ocx-answer .ocx-operations").innerText()).toContain("did: mark from-the-phone")
    expect(readFileSync(join(build, "marks.log"), "utf8")).toBe("from-the-phone\n")
    const widths = await page.evaluate<{ scroll: number; inner: number }>(
      "({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth })"
    )
    expect(widths.scroll).toBeLessThanOrEqual(widths.inner)
    const phoneShot = join(screenshots, "guarded-answer-phone.png")
    await page.screenshot({ path: phoneShot, fullPage: true })
    console.log(`screenshot (phone, ${widths.inner}px wide, scrollWidth ${widths.scroll}): ${phoneShot}`)
    expect(existsSync(phoneShot)).toBe(true)
    await context.close()
  }, 90_000)

  it("a person writes a run with create: a dry run writes nothing, then for real, and the run is in the forum", async () => {
    const context = await browser.newContext({ viewport: { width: 1024, height: 900 } })
    const page = await context.newPage()
    await logIn(page)
    await page.goto(`${server.base}/ext/ocx2-cgi/tools`)
    // the web offers create, but not stage (the checkout's own code) or post (Fossil's forum page is for that)
    expect(await page.locator("a[href='/ext/ocx2-cgi/create']").count()).toBe(1)
    expect(await page.locator("a[href='/ext/ocx2-cgi/stage']").count()).toBe(0)
    expect(await page.locator("a[href='/ext/ocx2-cgi/post']").count()).toBe(0)
    const ocxShot = join(screenshots, "ocx-page-create.png")
    await page.screenshot({ path: ocxShot, fullPage: true })

    await Promise.all([page.waitForNavigation(), page.click("a[href='/ext/ocx2-cgi/create']")])
    // a complete run, as test/support/nodeWorld.ts shellRun makes one
    const fields = {
      clone: serverCode(),
      workspace: [
        { step: "directory", at: "$$root$$/work/$$run$$" },
        { step: "files", of: "trunk", into: "$$workspace$$/tree" }
      ],
      sandbox: {
        uid: 1000, gid: 1000, linux_capabilities: [], network: false, isolate_terminal: true, ends_with_parent: true,
        proc: "/proc", dev: "/dev", tmp: "/tmp", read_only: ["/usr", "/bin", "/lib", "/lib64", "/etc"], read_write: ["$$workspace$$"],
        homes: [], created_files: []
      },
      limits: { wall: "2m" },
      process: { user: "builder", command: ["sh", "-c", "ls tree"], env: { PATH: "/usr/bin:/bin" } }
    }
    await page.fill("#f-title", "A run from the browser")
    await page.fill("#f-node", "lab")
    await page.fill("#f-objective", "List the files of trunk.")
    await page.fill("#f-fields", JSON.stringify(fields, null, 2))
    await page.check("#f-dry_run")
    const before = state()
    await Promise.all([page.waitForNavigation(), page.click("form.ocx-form button[type=submit]")])
    const dry = page.locator("#ocx-answer")
    expect(await dry.getAttribute("data-reason")).toBe("dry_run")
    expect(await dry.innerText()).toContain("Dry run: nothing was done")
    await dry.locator("details.ocx-did > summary").click()
    expect(await dry.locator(".ocx-operations").innerText()).toContain(`would: write a new thread "A run from the browser" as alice, holding a run for lab`)
    const dryJson = JSON.parse(await dry.locator("pre.ocx-json").textContent() ?? "")
    expect(dryJson.output.message).toEqual({ ocx: 2, to: "lab", run: { ...fields, objective: "List the files of trunk." } })
    expect(state()).toBe(before)
    const dryShot = join(screenshots, "create-dry-run.png")
    await page.screenshot({ path: dryShot, fullPage: true })

    // the form came back as it was sent: the person runs it for real
    expect(await page.inputValue("#f-title")).toBe("A run from the browser")
    await page.uncheck("#f-dry_run")
    await Promise.all([page.waitForNavigation(), page.click("form.ocx-form button[type=submit]")])
    const done = page.locator("#ocx-answer")
    expect(await done.getAttribute("data-reason")).toBe("completed")
    const answer = JSON.parse(await done.locator("pre.ocx-json").textContent() ?? "")
    expect(answer.stopped).toEqual({ reason: "completed" })
    expect(answer.operations.at(-1)).toMatchObject({ op: "write", done: true })
    const run: string = answer.output.run
    expect(run).toMatch(/^[0-9a-f]{64}$/)
    expect(answer.output.thread).toBe(run)
    expect(state()).not.toBe(before)
    // the answer links to the run it made (issue 40)
    expect(await done.locator("a.ocx-run-link").getAttribute("href")).toBe(`/ext/ocx2-cgi/watch?run=${run}`)
    const answerShot = join(screenshots, "create-answer.png")
    await page.screenshot({ path: answerShot, fullPage: true })

    // the run is in Fossil's forum: in the list of threads, and as the post itself
    await page.goto(`${server.base}/forum`)
    expect(await page.locator("body").innerText()).toContain("A run from the browser")
    await page.goto(`${server.base}/forumpost/${run.slice(0, 16)}`)
    const post = await page.locator("body").innerText()
    expect(post).toContain("A run from the browser")
    expect(post).toContain("List the files of trunk.")
    expect(post).toContain(`{"ocx":2,"to":"lab","run":{`)
    const forumShot = join(screenshots, "create-forum-post.png")
    await page.screenshot({ path: forumShot, fullPage: true })
    console.log(`screenshots: ${ocxShot} ${dryShot} ${answerShot} ${forumShot}`)
    await context.close()
  }, 120_000)

  it("a page on another site that posts create's form in the person's browser changes nothing", async () => {
    const target = `${server.base}/ext/ocx2-cgi/create`
    const evil = Http.createServer((_request, response) => {
      response.writeHead(200, { "content-type": "text/html" })
      response.end(`<form id="f" method="post" action="${target}">
<input name="title" value="forged"><input name="node" value="lab"><input name="objective" value="x">
<input name="user" value="builder"><input name="fields" value='{"process": {"command": ["true"]}}'>
</form><script>document.getElementById("f").submit()</script>`)
    })
    await new Promise<void>((resolve) => evil.listen(0, "127.0.0.1", resolve))
    const context = await browser.newContext()
    try {
      const page = await context.newPage()
      await logIn(page)
      const before = state()
      const evilUrl = `http://127.0.0.1:${(evil.address() as { port: number }).port}/`
      const [response] = await Promise.all([
        page.waitForResponse((r) => r.url() === target && r.request().method() === "POST"),
        page.goto(evilUrl)
      ])
      expect(response.status()).toBe(403)
      await page.waitForLoadState()
      expect(await page.locator("body").innerText()).toContain(`a change is taken only from its own page, ${target}: this request came from`)
      expect(state()).toBe(before)
    } finally {
      await context.close()
      await new Promise((resolve) => evil.close(resolve))
    }
  }, 90_000)
})
