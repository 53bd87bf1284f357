import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { chromium, type Browser, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { create } from "../../src/tools/create.js"
import { hook } from "../../src/tools/hook.js"
import { read as read_ } from "../../src/tools/read.js"
import type { WatchOutput } from "../../src/tools/watch.js"
import { runningServer } from "../../src/follow/StreamServer.js"
import { fossil, webLogin, type WebSession } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { closeHookWorld, makeHookWorld, type HookWorld, waitFor } from "../node/hookWorld.js"

// The runs page and a run page in Chromium (issue 16): a running run's output appears on its page
// live, without a reload, from the node's stream server; screenshots are saved by the test run.

let world: HookWorld
let browser: Browser
let alice: WebSession
const screenshots = Path.join(Os.tmpdir(), "ocx2-screenshots", "run-page")

beforeAll(async () => {
  world = await makeHookWorld({ pages: true })
  // the stream server is another origin (its own port): Fossil's Content-Security-Policy must let the
  // page reach it, as docs/operations.md says to set it
  await fossil(["settings", "default-csp",
    "default-src 'self' data:; script-src 'self' 'nonce-$nonce'; style-src 'self' 'unsafe-inline'; img-src * data:; connect-src 'self' http://127.0.0.1:*",
    "-R", world.repository])
  expect((await world.call(hook, { node: users.node.login, root: world.root })).stopped.reason).toBe("completed")
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
  })
  Fs.mkdirSync(screenshots, { recursive: true })
}, 120_000)

afterAll(async () => {
  await browser?.close()
  const server = world === undefined ? undefined : runningServer(world.root)
  if (server !== undefined) process.kill(server.pid, "SIGTERM")
  await closeHookWorld(world)
})

const logIn = async (page: Page) => {
  await page.goto(`${world.server.url}login`)
  await page.fill("input[name=u]", users.admin.login)
  await page.fill("input[name=p]", users.admin.password)
  await Promise.all([page.waitForNavigation(), page.click("input[name=in]")])
}

/**
 * A script that prints `count` lines named `word`, the second half only once the test lets it go:
 * the page is open while the run runs however loaded the machine, and nothing waits out a sleep.
 */
const gatedLines = (word: string, count: number) => {
  const half = count / 2
  return `for i in $(seq 1 ${half}); do echo "${word} $i"; sleep 0.05; done; ${waitForGo}; ` +
    `for i in $(seq ${half + 1} ${count}); do echo "${word} $i"; sleep 0.05; done`
}
const waitForGo = "while [ ! -e $$workspace$$/go ]; do sleep 0.05; done"
const letGo = (run: string) => Fs.writeFileSync(Path.join(world.root, "work", run, "go"), "")

const createRun = async (script: string) => {
  const { process: base, objective: _objective, ...rest } = shellRun(world, script)
  const answer = await world.call(create, { title: "a run to follow", node: users.node.login, objective: "count slowly", fields: { ...rest, process: base } })
  expect(answer.stopped).toEqual({ reason: "completed" })
  return answer.output!.run!
}

describe("the run page", () => {
  it("shows a running run's output live, without a reload, from the runs page's link; then its outcome; and reads well on a phone", async () => {
    const run = await createRun(`${gatedLines("tick", 40)}; echo finished >&2`)
    expect(await waitFor(async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), 90_000)).toBe(true)
    for (const [name, viewport] of [["desktop", { width: 1100, height: 900 }]] as const) {
      const context = await browser.newContext({ viewport })
      const page = await context.newPage()
      const violations: Array<string> = []
      page.on("console", (m) => { if (m.type() === "error") violations.push(m.text()) })
      try {
        await logIn(page)
        await page.goto(`${world.server.url}ext/ocx2-cgi/runs`)
        await expect.poll(() => page.locator(`tr[data-run="${run}"]`).count()).toBe(1)
        await page.screenshot({ path: Path.join(screenshots, `${name}-runs.png`), fullPage: true })
        let navigations = 0
        await Promise.all([page.waitForNavigation(), page.click(`tr[data-run="${run}"] a[href*="watch"]`)])
        page.on("framenavigated", () => navigations++)
        expect(await page.locator("#ocx-run-state").textContent()).toBe("started")
        const atLoad = (await page.locator("#ocx-stream").textContent()) ?? ""
        const seenAtLoad = atLoad.split("\n").filter((l) => l.startsWith("tick")).length
        expect(seenAtLoad).toBeLessThan(40)
        // a later line arrives on the page as the process prints it
        letGo(run)
        await page.locator("#ocx-stream", { hasText: `tick ${seenAtLoad + 1}` }).waitFor({ timeout: 60_000 })
        // from the stream server itself (its token and origin taken), not through this site
        expect(await page.locator("#ocx-live").textContent()).toBe("Following the run as its process prints.")
        await page.screenshot({ path: Path.join(screenshots, `${name}-running.png`), fullPage: true })
        await page.locator("#ocx-run-state", { hasText: "exited 0" }).waitFor({ timeout: 60_000 })
        const all = (await page.locator("#ocx-stream").textContent()) ?? ""
        expect(all.split("\n").filter((l) => l.startsWith("tick"))).toEqual(Array.from({ length: 40 }, (_, i) => `tick ${i + 1}`))
        expect(all).toContain("finished")
        expect(navigations).toBe(0)
        expect(violations.filter((v) => /Content Security Policy|EventSource/i.test(v))).toEqual([])
        await page.screenshot({ path: Path.join(screenshots, `${name}-ended.png`), fullPage: true })
        // reloaded, the page of the run that is over shows its reports and no stream
        await page.reload()
        expect(await page.locator("#ocx-run-state").textContent()).toBe("exited 0")
        expect(await page.locator(".ocx-post-ended").count()).toBe(1)
        expect(await page.locator("#ocx-stream[data-live]").count()).toBe(0)
        // the thread links to it: the node's started names the run page
        await page.goto(`${world.server.url}forumpost/${run}`)
        await Promise.all([page.waitForNavigation(), page.click(`a[href$="ext/ocx2-cgi/watch?run=${run}"]`)])
        expect(await page.locator("#ocx-run-state").textContent()).toBe("exited 0")
      } finally {
        await context.close()
      }
    }

    // the same pages read well on a phone: nothing wider than the screen
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true })
    const page = await context.newPage()
    try {
      await logIn(page)
      await page.goto(`${world.server.url}ext/ocx2-cgi/runs`)
      await page.screenshot({ path: Path.join(screenshots, "phone-runs.png"), fullPage: true })
      expect(await page.evaluate("document.documentElement.scrollWidth"), "the runs page's width on a phone").toBeLessThanOrEqual(390 + 1)
      await page.goto(`${world.server.url}ext/ocx2-cgi/watch?run=${run}`)
      expect(await page.locator("#ocx-run-state").textContent()).toBe("exited 0")
      await page.screenshot({ path: Path.join(screenshots, "phone-run.png"), fullPage: true })
    } finally {
      await context.close()
    }
    console.log(`screenshots of the runs page and a run page: ${screenshots}`)
  }, 180_000)

  it("the runs list is the landing page, of the window's width; a running run's Took counts and its state changes without a reload; screenshots at 1200 and 400 pixels", async () => {
    const run = await createRun(gatedLines("tock", 20))
    expect(await waitFor(async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), 90_000)).toBe(true)
    // the test's own output directory (kept after the world is gone), and one copy for people to look at
    const shots = Path.join(screenshots, "issue-40")
    const kept = "/tmp/ocx2-screens"
    Fs.mkdirSync(shots, { recursive: true })
    Fs.mkdirSync(kept, { recursive: true })
    const shoot = async (page: Page, name: string) => {
      const path = Path.join(shots, name)
      await page.screenshot({ path, fullPage: true })
      Fs.copyFileSync(path, Path.join(kept, name))
      console.log(`screenshot: ${path} (and ${Path.join(kept, name)})`)
    }
    for (const width of [1200, 400]) {
      const context = await browser.newContext({ viewport: { width, height: 900 } })
      const page = await context.newPage()
      const violations: Array<string> = []
      page.on("console", (m) => { if (m.type() === "error") violations.push(m.text()) })
      try {
        await logIn(page)
        await page.goto(`${world.server.url}ext/ocx2-cgi`)
        const row = page.locator(`tr[data-run="${run}"]`)
        expect(await row.locator("td.ocx-state").textContent()).toBe("started")
        if (width === 1200) {
          // the list takes the window's width, not half of it
          const table = await page.locator("#ocx-runs").evaluate((e) => e.getBoundingClientRect().width)
          expect(table).toBeGreaterThan(width * 0.8)
          // Took counts on by itself: no reload
          let navigations = 0
          page.on("framenavigated", () => navigations++)
          const took = row.locator("td.ocx-took")
          const first = await took.textContent()
          expect(first).toMatch(/^\d+ s$/)
          await expect.poll(() => took.textContent(), { timeout: 20_000 }).not.toBe(first)
          expect(navigations).toBe(0)
        }
        expect(await page.evaluate("document.documentElement.scrollWidth"), `the runs list's width at ${width} pixels`).toBeLessThanOrEqual(width + 1)
        await shoot(page, `runs-${width}.png`)
        await page.goto(`${world.server.url}ext/ocx2-cgi/watch?run=${run}`)
        await page.locator("#ocx-stream", { hasText: "tock 1" }).waitFor({ timeout: 30_000 })
        expect(await page.locator("#ocx-run-state").textContent()).toBe("started")
        expect(await page.evaluate("document.documentElement.scrollWidth"), `the run page's width at ${width} pixels`).toBeLessThanOrEqual(width + 1)
        await shoot(page, `run-${width}.png`)
        expect(violations.filter((v) => /Content Security Policy/i.test(v))).toEqual([])
      } finally {
        await context.close()
      }
    }
    // the list open while the run ends: its state changes there without a reload
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } })
    const page = await context.newPage()
    try {
      await logIn(page)
      await page.goto(`${world.server.url}ext/ocx2-cgi`)
      let navigations = 0
      page.on("framenavigated", () => navigations++)
      const count = page.getByText(/^\d+ of \d+ runs?, newest first\.$/)
      const counted = await count.textContent()
      // a run posted meanwhile is added to the list, first, without a reload; the rest stay
      const added = await createRun("echo added")
      const addedRow = page.locator(`tr[data-run="${added}"]`)
      await addedRow.waitFor({ timeout: 30_000 })
      expect(await page.locator("#ocx-runs tbody tr").first().getAttribute("data-run")).toBe(added)
      expect(await addedRow.getAttribute("class")).toContain("ocx-new")
      expect(await addedRow.locator(`a[href$="watch?run=${added}"]`).count()).toBe(1)
      expect(await page.locator(`tr[data-run="${run}"] td.ocx-state`).textContent()).toBe("started")
      expect(await count.textContent()).not.toBe(counted)
      expect(navigations).toBe(0)
      await shoot(page, "runs-1200-added.png")
      letGo(run)
      await page.locator(`tr[data-run="${run}"] td.ocx-state`, { hasText: "exited 0" }).waitFor({ timeout: 60_000 })
      expect(await page.locator(`tr[data-run="${run}"] td.ocx-state`).getAttribute("class")).toContain("ocx-state-passed")
      expect(navigations).toBe(0)
      await shoot(page, "runs-1200-ended.png")
    } finally {
      await context.close()
    }
  }, 180_000)

  it("a run page leads with its state and a Took that counts; its stop button is for admin and setup users, and a POST from anyone else stops nothing", async () => {
    const run = await createRun(gatedLines("halt", 20))
    expect(await waitFor(async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), 90_000)).toBe(true)
    const watchUrl = `${world.server.url}ext/ocx2-cgi/watch?run=${run}`
    const stopUrl = `${world.server.url}ext/ocx2-cgi/stop`
    // mallory reads the forum but holds neither admin nor setup: no button, and her POST is refused
    const mallory = await webLogin(world.server.url, users.stranger.login, users.stranger.password)
    // server paths are for setup users: the landing page's release line names ROOT for alice only
    const landing = `${world.server.url}ext/ocx2-cgi`
    expect(await (await fetch(landing, { headers: { cookie: alice.cookie } })).text()).toContain(` of ${world.root}, the server`)
    const herLanding = await (await fetch(landing, { headers: { cookie: mallory.cookie } })).text()
    expect(herLanding).toContain("[server path], the server")
    expect(herLanding).not.toContain(world.root)
    const hers = await (await fetch(watchUrl, { headers: { cookie: mallory.cookie } })).text()
    expect(hers).toContain(`id="ocx-run-state"`)
    expect(hers).not.toContain(`class="ocx-stop"`)
    const refused = await fetch(`${stopUrl}?format=json`, {
      method: "POST",
      headers: { cookie: mallory.cookie, referer: watchUrl, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ run }).toString()
    })
    const answer: any = await refused.json()
    expect(answer.stopped.reason).toBe("refused")
    expect(answer.stopped.message).toContain("stop needs Fossil's admin (a) or setup (s) capability")
    expect((await world.replies(run)).some((m) => m.kind === "stop")).toBe(false)
    // from another site, alice's browser stops nothing either
    const forged = await fetch(`${stopUrl}?format=json`, {
      method: "POST",
      headers: { cookie: alice.cookie, referer: "https://elsewhere.example/ext/ocx2-cgi/watch", "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ run }).toString()
    })
    expect(forged.status).toBe(403)
    expect((await world.replies(run)).some((m) => m.kind === "stop")).toBe(false)

    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } })
    const page = await context.newPage()
    try {
      await logIn(page)
      await page.goto(watchUrl)
      expect(await page.locator("#ocx-run-state").textContent()).toBe("started")
      // the state leads, then the output, then the buttons
      const order = await page.evaluate<Array<number>>(`["#ocx-run-state", "#ocx-stream", "button.ocx-stop"]
        .map((selector) => document.querySelector(selector).getBoundingClientRect().top)`)
      expect(order[0]).toBeLessThan(order[1]!)
      expect(order[1]).toBeLessThan(order[2]!)
      const took = page.locator("#ocx-run-took")
      const first = await took.textContent()
      await expect.poll(() => took.textContent(), { timeout: 20_000 }).not.toBe(first)
      await Promise.all([page.waitForNavigation(), page.click("button.ocx-stop")])
      expect(await page.locator("#ocx-answer").getAttribute("data-reason")).toBe("completed")
      expect(await waitFor(async () => ((await world.replies(run)).some((m) => m.kind === "stop") ? true : undefined), 30_000)).toBe(true)
    } finally {
      await context.close()
    }
  }, 180_000)

  it("Run again on a finished run's page writes the same run anew as the signed-in user, in its thread, and it is answered; no one else is offered it (issue 40)", async () => {
    const run = await createRun("echo again-and-again; echo \"as $(id -un)\"")
    await world.waitEnded(run, 90_000)
    const watchUrl = `${world.server.url}ext/ocx2-cgi/watch?run=${run}`
    // not signed in, or without admin or setup: no button, and create's page refuses the POST
    expect(await (await fetch(watchUrl)).text()).not.toContain(`class="ocx-again"`)
    const mallory = await webLogin(world.server.url, users.stranger.login, users.stranger.password)
    expect(await (await fetch(watchUrl, { headers: { cookie: mallory.cookie } })).text()).not.toContain(`class="ocx-again"`)
    const before = (await world.thread(run)).length
    const refused: any = await (await fetch(`${world.server.url}ext/ocx2-cgi/create?format=json`, {
      method: "POST",
      headers: { cookie: mallory.cookie, referer: watchUrl, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ again: run }).toString()
    })).json()
    expect(refused.stopped.reason).toBe("refused")
    expect(refused.stopped.message).toContain("create needs Fossil's admin (a) or setup (s) capability")
    expect((await world.thread(run)).length).toBe(before)

    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } })
    const page = await context.newPage()
    try {
      await logIn(page)
      await page.goto(watchUrl)
      expect(await page.locator("#ocx-run-state").textContent()).toBe("exited 0")
      // a finished run has no stop button; its run-again button follows its output
      expect(await page.locator("button.ocx-stop").count()).toBe(0)
      await Promise.all([page.waitForNavigation(), page.click("button.ocx-again")])
      expect(await page.locator("#ocx-answer").getAttribute("data-reason")).toBe("completed")
      const link = page.locator("a.ocx-run-link")
      const again = /watch\?run=([0-9a-f]{64})$/.exec((await link.getAttribute("href")) ?? "")?.[1]
      expect(again).toBeDefined()
      expect(again).not.toBe(run)
      await Promise.all([page.waitForNavigation(), link.click()])
      // followed on its own run page to its end
      await page.locator("#ocx-run-state", { hasText: "exited 0" }).waitFor({ timeout: 90_000 })
      await page.screenshot({ path: Path.join(screenshots, "issue-40", "run-again.png"), fullPage: true })
      // the same run anew: its fields, its node, where it was (a reply to it in its thread), as alice
      const ended = await world.waitEnded(again!, 90_000)
      expect(ended.find((m) => m.kind === "ended")!.content).toMatchObject({ outcome: "exited", exit: 0 })
      const read = await world.call(read_, { what: again! })
      const original = await world.call(read_, { what: run })
      expect(read.output!.run!.content).toEqual(original.output!.run!.content)
      expect(read.output!.run!.summary).toMatchObject({ node: users.node.login, sender: users.admin.login })
      expect(read.output!.posts!.find((p) => p.hash === again)).toMatchObject({ kind: "run", in_reply_to: run, sender: users.admin.login })
      await page.reload()
      expect(await page.locator("button.ocx-again").count()).toBe(1)
      // its reports are its own: what came after it in the thread, not the first run and its replies
      expect(await page.locator(".ocx-post-run").count()).toBe(0)
      expect(await page.locator(".ocx-post-ended").count()).toBe(1)
    } finally {
      await context.close()
    }
  }, 240_000)

  it("Fossil's menu links the runs list once its mainmenu is set as docs/operations.md says", async () => {
    const docs = Fs.readFileSync(Path.join(import.meta.dirname, "../../docs/operations.md"), "utf8")
    const section = docs.slice(docs.indexOf("### The pages in Fossil's menu"))
    const menu = /fossil settings mainmenu '([^']+)' -R/.exec(section)?.[1]
    expect(menu).toContain("Runs /ext/ocx2-cgi {2 r} {}")
    const before = await (await fetch(`${world.server.url}timeline`, { headers: { cookie: alice.cookie } })).text()
    expect(before).not.toContain(`href='/ext/ocx2-cgi'`)
    await fossil(["settings", "mainmenu", menu!, "-R", world.repository])
    const after = await (await fetch(`${world.server.url}timeline`, { headers: { cookie: alice.cookie } })).text()
    const mainmenu = /<div class="mainmenu">([\s\S]*?)<\/div>/.exec(after)?.[1] ?? ""
    expect(mainmenu).toContain(`<a href='/ext/ocx2-cgi' class=''>Runs</a>`)
    expect(mainmenu).toContain(`>Timeline</a>`)
  })

  it("a page whose live stream was cut goes on live with a fresh token, from where the stream had read to: every line once", async () => {
    const run = await createRun(gatedLines("beat", 20))
    expect(await waitFor(async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), 90_000)).toBe(true)
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } })
    const page = await context.newPage()
    try {
      await logIn(page)
      await page.goto(`${world.server.url}ext/ocx2-cgi/watch?run=${run}`)
      await page.locator("#ocx-stream", { hasText: "beat 10" }).waitFor({ timeout: 60_000 })
      const first = runningServer(world.root)!
      expect(await page.locator("#ocx-live").textContent()).toBe("Following the run as its process prints.")
      // the stream server ends under the page (as it does when restarted): the page asks itself for a new token
      process.kill(first.pid, "SIGTERM")
      expect(await waitFor(() => {
        const now = runningServer(world.root)
        return now !== undefined && now.pid !== first.pid ? true : undefined
      }, 30_000)).toBe(true)
      await page.locator("#ocx-live", { hasText: "Following the run as its process prints." }).waitFor({ timeout: 30_000 })
      letGo(run)
      await page.locator("#ocx-run-state", { hasText: "exited 0" }).waitFor({ timeout: 60_000 })
      const all = (await page.locator("#ocx-stream").textContent()) ?? ""
      expect(all.split("\n").filter((l) => l.startsWith("beat"))).toEqual(Array.from({ length: 20 }, (_, i) => `beat ${i + 1}`))
    } finally {
      await context.close()
    }
  }, 180_000)

  it("with Fossil's own Content-Security-Policy (no connect-src for the stream server) the page still follows the run live, through its own site", async () => {
    await fossil(["unset", "default-csp", "-R", world.repository])
    try {
      const run = await createRun(gatedLines("step", 30))
      expect(await waitFor(async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), 90_000)).toBe(true)
      const context = await browser.newContext({ viewport: { width: 1100, height: 900 } })
      const page = await context.newPage()
      try {
        await logIn(page)
        let navigations = 0
        await page.goto(`${world.server.url}ext/ocx2-cgi/watch?run=${run}`)
        page.on("framenavigated", () => navigations++)
        await page.locator("#ocx-live", { hasText: "through this site" }).waitFor({ timeout: 30_000 })
        const atLoad = (await page.locator("#ocx-stream").textContent()) ?? ""
        const seenAtLoad = atLoad.split("\n").filter((l) => l.startsWith("step")).length
        expect(seenAtLoad).toBeLessThan(30)
        letGo(run)
        await page.locator("#ocx-stream", { hasText: `step ${seenAtLoad + 1}` }).waitFor({ timeout: 60_000 })
        await page.locator("#ocx-run-state", { hasText: "exited 0" }).waitFor({ timeout: 60_000 })
        const all = (await page.locator("#ocx-stream").textContent()) ?? ""
        // every line once, in order: each answer goes on from where the one before ended
        expect(all.split("\n").filter((l) => l.startsWith("step"))).toEqual(Array.from({ length: 30 }, (_, i) => `step ${i + 1}`))
        expect(navigations).toBe(0)
        await page.screenshot({ path: Path.join(screenshots, "desktop-followed-through-the-site.png"), fullPage: true })
      } finally {
        await context.close()
      }
    } finally {
      await fossil(["settings", "default-csp",
        "default-src 'self' data:; script-src 'self' 'nonce-$nonce'; style-src 'self' 'unsafe-inline'; img-src * data:; connect-src 'self' http://127.0.0.1:*",
        "-R", world.repository])
    }
  }, 180_000)

  it("the stream server gives a run only with the page's grant for it, and to a viewer who may read it", async () => {
    const run = await createRun(`echo streamed; ${waitForGo}`)
    expect(await waitFor(async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), 90_000)).toBe(true)
    const answer = await (await fetch(`${world.server.url}ext/ocx2-cgi/watch?run=${run}&format=json`, { headers: { cookie: alice.cookie } })).json() as { output: WatchOutput }
    const live = answer.output.live!
    expect(live.url).toMatch(new RegExp(`^:\\d+/watch/${run}\\?offset=\\d+$`))
    const url = `http://127.0.0.1${live.url}`
    expect((await fetch(url)).status).toBe(403)
    expect((await fetch(`${url}&token=${live.token}x`)).status).toBe(403)
    const other = await createRun("true")
    expect((await fetch(`http://127.0.0.1${live.url.replace(run, other)}&token=${live.token}`)).status).toBe(403)
    const streamed = await fetch(`http://127.0.0.1${live.url.replace(/offset=\d+/, "offset=0")}&token=${encodeURIComponent(live.token)}`)
    expect(streamed.status).toBe(200)
    expect(streamed.headers.get("content-type")).toContain("text/event-stream")
    letGo(run)
    const text = await streamed.text()
    expect(text).toContain("event: output\ndata: ")
    expect(text).toContain("streamed\\n")
    expect(text).toMatch(/event: end\ndata: .*"state":"exited 0"/)
    // a viewer Fossil gives no Read Forum gets no grant: the page refuses them first
    const builder = await webLogin(world.server.url, users.builder.login, users.builder.password)
    const refused = await (await fetch(`${world.server.url}ext/ocx2-cgi/watch?run=${run}&format=json`, { headers: { cookie: builder.cookie } })).json() as { stopped: { reason: string }; output?: unknown }
    expect(refused.stopped.reason).toBe("refused")
    expect(refused.output).toBeUndefined()
  }, 180_000)
})
