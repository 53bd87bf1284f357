import { chromium, type Browser, type Page } from "playwright-core"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bundle, startExtServer, type ExtServer, type TestUser } from "./extServer.js"

// The CGI's pages in a real headless Chromium against a real `fossil server`, as a person uses
// them: log in through Fossil's login page, open OCX, fill a form, submit, read the answer.

const alice: TestUser = { login: "alice", password: "alice-secret-1", capabilities: "s" }

/** Screenshots stay after the run, for a person to look at; the test prints where. */
const screenshots = join(tmpdir(), "ocx2-screenshots")

let server: ExtServer
let build: string
let browser: Browser

beforeAll(async () => {
  build = mkdtempSync(join(tmpdir(), "ocx2-browser-build-"))
  const cgiTest = await bundle(join(import.meta.dirname, "fixtures/ocx2-cgi-test.ts"), build, "ocx2-cgi-test")
  const cgi = await bundle(join(import.meta.dirname, "../../bin/ocx2-cgi.ts"), build, "ocx2-cgi")
  server = await startExtServer([alice], { "ocx2-cgi": cgi, "ocx2-cgi-test": cgiTest })
  mkdirSync(screenshots, { recursive: true })
  // Playwright gives each launch a new empty profile directory of its own (--user-data-dir).
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"
    ]
  })
}, 60_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(build, { recursive: true, force: true })
})

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
  }, 30_000)

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
  }, 30_000)
})
