// The host check's hands in the guest (guest.sh), run by the guest's Node with nothing but Node:
//   post URL USER PASSWORD TITLE RUN-JSON   a run for the node `lab`, posted through the forum's web
//                                           form as a person posts one; prints the post's hash prefix
//   thread                                  reads `ocx2 --json read RUN --thread` on stdin; prints
//                                           `started=N ended=M outcome=... limit=... exit=...`
import * as Fs from "node:fs"

const [mode, ...args] = process.argv.slice(2)

const login = async (url, user, password) => {
  const res = await fetch(url + "login", {
    method: "POST", redirect: "manual",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Referer: url + "login" },
    body: new URLSearchParams({ u: user, p: password, in: "Login" }).toString()
  })
  await res.arrayBuffer()
  const cookie = (res.headers.getSetCookie?.() ?? []).map((c) => c.split(";")[0]).find((c) => c.startsWith("fossil-"))
  if (cookie === undefined) throw new Error(`login of ${user} failed: HTTP ${res.status}`)
  return cookie
}

if (mode === "post") {
  const [url, user, password, title, run] = args
  const cookie = await login(url, user, password)
  const form = await (await fetch(url + "forume1", { headers: { Cookie: cookie } })).text()
  const csrf = /name="csrf" value="([^"]*)"/.exec(form)?.[1]
  const text = "A run of the host check.\n\n```json\n" + JSON.stringify({ ocx: 2, to: "lab", run: JSON.parse(run) }) + "\n```\n"
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(url + "forume1", {
      method: "POST", redirect: "manual",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Cookie: cookie, Referer: url + "forume1" },
      body: new URLSearchParams({ title, mimetype: "text/x-markdown", content: text, submit: "1", ...(csrf ? { csrf } : {}) }).toString()
    })
    const body = await res.text()
    const m = /\/forumpost\/([0-9a-f]+)/.exec(res.headers.get("location") ?? "")
    if (res.status === 302 && m) { console.log(m[1]); break }
    if (attempt === 5) { console.error(`post failed: HTTP ${res.status} ${body.replace(/<[^>]*>/g, " ").slice(0, 300)}`); process.exit(1) }
    await new Promise((r) => setTimeout(r, 300 * attempt))
  }
} else if (mode === "thread") {
  const input = JSON.parse(Fs.readFileSync(0, "utf8"))
  const posts = []
  const walk = (v) => {
    if (Array.isArray(v)) v.forEach(walk)
    else if (v !== null && typeof v === "object") {
      if (typeof v.kind === "string" && typeof v.text === "string" && typeof v.hash === "string") posts.push(v)
      else Object.values(v).forEach(walk)
    }
  }
  walk(input)
  const seen = new Set()
  const unique = posts.filter((p) => !seen.has(p.hash) && seen.add(p.hash))
  const count = (k) => unique.filter((p) => p.kind === k).length
  const ended = unique.find((p) => p.kind === "ended")
  let e = {}
  if (ended) {
    const block = /```json\n([\s\S]*?)\n```/.exec(ended.text)?.[1]
    try { e = JSON.parse(block).ended ?? {} } catch { e = {} }
  }
  console.log(`started=${count("started")} ended=${count("ended")} outcome=${e.outcome ?? ""} limit=${e.limit ?? ""} exit=${e.exit ?? ""} note=${JSON.stringify(e.note ?? "").slice(0, 200)}`)
} else {
  console.error("usage: post URL USER PASSWORD TITLE RUN-JSON | thread")
  process.exit(2)
}
