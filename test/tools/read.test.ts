import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { create } from "../../src/tools/create.js"
import { hook } from "../../src/tools/hook.js"
import { read, type ReadOutput } from "../../src/tools/read.js"
import { fossil, webLogin, webNewTicket, type WebSession } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { closeHookWorld, dist, makeHookWorld, type HookWorld, waitFor } from "../node/hookWorld.js"

// read (issue 16): a thread, a run with its reports, a ticket, a check-in and a file of the code,
// each as its user may read it, from the tool, the command line as shipped, the web page and MCP;
// and an agent-like MCP client that creates a run, follows it with ocx_runs and reads its kept logs.

let world: HookWorld
let alice: WebSession
let ran: string
let ticket: string

const call = async (input: object, as: string = users.admin.login) => world.call(read, input, { as })
const output = async (input: object, as?: string): Promise<ReadOutput> => {
  const answer = await call(input, as)
  expect(answer.stopped, JSON.stringify(answer.stopped)).toEqual({ reason: "completed" })
  return answer.output!
}

beforeAll(async () => {
  world = await makeHookWorld({ pages: true })
  // nobody reads nothing here: what a user reads is what their own capabilities give
  await fossil(["user", "capabilities", "nobody", "", "-R", world.repository])
  expect((await world.call(hook, { node: users.node.login, root: world.root })).stopped.reason).toBe("completed")
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  const { process: base, objective: _objective, ...rest } = shellRun(world, "echo to-stdout; echo to-stderr >&2; exit 3")
  const created = await world.call(create, {
    title: "a run to read", node: users.node.login, objective: "print and fail", fields: { ...rest, process: { ...base, keep: { stdout_when: "always" } } }
  })
  expect(created.stopped).toEqual({ reason: "completed" })
  ran = created.output!.run!
  await world.waitEnded(ran, 90_000)
  // the kept logs follow the ended
  await world.waitFor("the run is answered and its kept logs are read", async () => ((await world.replies(ran)).length >= 2 && (await output({ what: ran })).posts!.some((p) => p.kind === "kept logs") ? true : undefined), { ms: 60_000, run: ran })
  ticket = await webNewTicket(alice, { title: "a ticket to read", icomment: "the first words of the ticket" })
}, 300_000)

afterAll(async () => {
  await closeHookWorld(world)
})

describe("read", () => {
  it("a run: its state, its thread with started, ended and the kept logs, by a prefix of its hash", async () => {
    const out = await output({ what: ran.slice(0, 10) })
    expect(out.kind).toBe("run")
    expect(out.name).toBe(ran)
    expect(out.run!.summary).toMatchObject({ run: ran, state: "ended", outcome: "exited", exit: 3, objective: "print and fail" })
    expect(out.posts!.map((p) => p.kind)).toEqual(["run", "started", "ended", "kept logs"])
    const kept = out.posts!.find((p) => p.kind === "kept logs")!
    expect(kept.sender).toBe(users.node.login)
    expect(kept.text).toMatch(/^The process exited 3\./)
    expect(kept.text).toContain("```stderr\nto-stderr\n```")
    expect(kept.text).toContain("```stdout\nto-stdout\n```")
  })

  it("a post alone, and with thread its whole thread", async () => {
    const ended = (await output({ what: ran })).posts!.find((p) => p.kind === "ended")!
    const post = await output({ what: ended.hash })
    expect(post.kind).toBe("post")
    expect(post.posts!.map((p) => p.hash)).toEqual([ended.hash])
    expect(post.posts![0]).toMatchObject({ sender: "lab", in_reply_to: ran })
    const thread = await output({ what: ended.hash, thread: true })
    expect(thread.kind).toBe("thread")
    expect(thread.name).toBe(ran)
    expect(thread.posts!.length).toBe(4)
  })

  it("a check-in with its files, and a file of the code at trunk and at a check-in", async () => {
    const file = await output({ what: "hello.txt" })
    expect(file.kind).toBe("file")
    expect(file.file).toMatchObject({ path: "hello.txt", binary: false, text: "hello from trunk\n", size: 17 })
    const checkin = await output({ what: file.file!.checkin.slice(0, 12) })
    expect(checkin.kind).toBe("checkin")
    expect(checkin.checkin).toMatchObject({ hash: file.file!.checkin, branch: "trunk", user: "alice", comment: "the first check-in" })
    expect(checkin.checkin!.files).toEqual([{ path: "hello.txt", hash: file.file!.hash }])
    expect((await output({ what: "./hello.txt", at: checkin.name })).file!.hash).toBe(file.file!.hash)
    const missing = await call({ what: "nope.txt" })
    expect(missing.stopped).toEqual({ reason: "refused", message: `no file nope.txt in the check-in ${checkin.name}` })
    const badAt = await call({ what: "hello.txt", at: "no-such-branch" })
    expect(badAt.stopped.message).toBe("at: no check-in named no-such-branch in the repository")
  })

  it("a ticket with its changes", async () => {
    const out = await output({ what: ticket.slice(0, 12) })
    expect(out.kind).toBe("ticket")
    expect(out.ticket!.id).toBe(ticket)
    expect(out.ticket!.fields.title).toBe("a ticket to read")
    expect(out.ticket!.changes[0]).toMatchObject({ sender: "alice", text: "the first words of the ticket" })
  })

  it("refuses what its user may not read, naming the capability, and names that do not name a record", async () => {
    // builder holds o and i: code, not the forum
    const post = await call({ what: ran }, users.builder.login)
    expect(post.stopped).toEqual({ reason: "refused", message: "forum posts are not yours to read here: that needs Fossil's Read Forum (2)" })
    expect((await call({ what: "hello.txt" }, users.builder.login)).stopped.reason).toBe("completed")
    // lab holds nothing of its own
    const code = await call({ what: "hello.txt" }, users.node.login)
    expect(code.stopped).toEqual({ reason: "refused", message: "check-ins and files of the code are not yours to read here: that needs Fossil's Read (o)" })
    const tickets = await call({ what: ticket }, users.node.login)
    expect(tickets.stopped.message).toBe("tickets are not yours to read here: that needs Fossil's Read Ticket (r)")
    expect((await call({ what: "" })).stopped.message).toMatch(/^what: name a post/)
    expect((await call({ what: "0000000000" })).stopped.message).toBe("no post, ticket, check-in or file named 0000000000 that you may read")
  })

  it("the command line as shipped prints a file as it is, and a run's thread", async () => {
    const ocx2 = (args: ReadonlyArray<string>, user = "alice") =>
      ChildProcess.spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "--repository", world.repository, "--user", user, ...args], { encoding: "utf8" })
    expect(ocx2(["read", "hello.txt"]).stdout).toBe("hello from trunk\n")
    const thread = ocx2(["read", ran]).stdout
    expect(thread).toMatch(new RegExp(`^run ${ran} for lab: exited 3`))
    expect(thread).toMatch(/exited 3/)
    expect(thread).toMatch(/kept logs by lab/)
    const refused = ocx2(["--json", "read", ran], "builder")
    expect(refused.status).toBe(1)
    expect(JSON.parse(refused.stdout).stopped.reason).toBe("refused")
  })

  it("a run that is not there is not found: 404 on the web page (HTML and JSON), a refusal naming it on the command line (exit 1) and through MCP (an error), as on the run page (issue 40)", async () => {
    const missing = "0123456789abcdef"
    const words = `no post, ticket, check-in or file named ${missing} that you may read`
    const page = await fetch(`${world.server.url}ext/ocx2-cgi/read?what=${missing}`, { headers: { cookie: alice.cookie } })
    expect(page.status).toBe(404)
    expect(await page.text()).toContain(words)
    const json = await fetch(`${world.server.url}ext/ocx2-cgi/read?what=${missing}&format=json`, { headers: { cookie: alice.cookie } })
    expect(json.status).toBe(404)
    expect(((await json.json()) as { stopped: unknown }).stopped).toEqual({ reason: "refused", message: words })
    // the run page says the same of it
    expect((await fetch(`${world.server.url}ext/ocx2-cgi/watch?run=${missing}`, { headers: { cookie: alice.cookie } })).status).toBe(404)
    // a viewer who reads no code is told it is not there too, not that code is not theirs
    expect((await call({ what: missing }, users.node.login)).stopped).toEqual({ reason: "refused", message: words })
    // a run that is there but not the viewer's to read is no 404: the refusal names the capability
    const builder = await webLogin(world.server.url, users.builder.login, users.builder.password)
    expect((await fetch(`${world.server.url}ext/ocx2-cgi/read?what=${ran}`, { headers: { cookie: builder.cookie } })).status).toBe(200)

    const ocx2 = (repository: string, args: ReadonlyArray<string>) =>
      ChildProcess.spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "--repository", repository, "--user", users.admin.login, ...args], { encoding: "utf8" })
    const cli = ocx2(world.repository, ["read", missing])
    expect(cli.status).toBe(1)
    expect(cli.stderr).toContain(`read: refused: ${words}`)
    // a repository whose forum has no post yet (Fossil makes its forum's table with the first): the same, not a failure
    const bare = Path.join(world.dir, "bare.fossil")
    await fossil(["init", "-A", users.admin.login, bare])
    const fresh = ocx2(bare, ["--json", "read", missing])
    expect(fresh.status, fresh.stderr).toBe(1)
    expect(JSON.parse(fresh.stdout).stopped).toEqual({ reason: "refused", message: words })

    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [Path.join(dist, "ocx2-mcp.mjs")],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", USER: "root", OCX_USER: users.admin.login, OCX_REPOSITORY: world.repository },
      stderr: "pipe"
    })
    const client = new Client({ name: "a-reader", version: "0.0.0" })
    await client.connect(transport)
    try {
      const result = await client.callTool({ name: "ocx_read", arguments: { what: missing } }) as unknown as { structuredContent: { stopped: unknown }; isError: boolean }
      expect(result.isError).toBe(true)
      expect(result.structuredContent.stopped).toEqual({ reason: "refused", message: words })
    } finally {
      await client.close()
    }
  })

  it("the web page reads on a GET, as the viewer Fossil signed in", async () => {
    const page = await (await fetch(`${world.server.url}ext/ocx2-cgi/read?what=${ran}`, { headers: { cookie: alice.cookie } })).text()
    expect(page).toContain(`id="ocx-run-state">exited 3</span>`)
    expect(page).toContain(`<div class="ocx-post ocx-post-kept-logs"`)
    expect(page).toContain("to-stderr")
    const file = await (await fetch(`${world.server.url}ext/ocx2-cgi/read?what=hello.txt&format=json`, { headers: { cookie: alice.cookie } })).json() as { output: ReadOutput }
    expect(file.output.file!.text).toBe("hello from trunk\n")
    // not signed in: nobody, who reads nothing here
    const anonymous = await (await fetch(`${world.server.url}ext/ocx2-cgi/read?what=${ran}&format=json`)).json() as { stopped: { reason: string } }
    expect(anonymous.stopped.reason).toBe("refused")
  })

  it("an agent-like MCP client creates a run, follows it with ocx_runs and reads its kept logs with ocx_read", async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [Path.join(dist, "ocx2-mcp.mjs")],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", USER: "root", OCX_USER: users.admin.login, OCX_REPOSITORY: world.repository },
      stderr: "pipe"
    })
    const client = new Client({ name: "an-agent", version: "0.0.0" })
    await client.connect(transport)
    try {
      const callTool = async (name: string, args: Record<string, unknown>) => {
        const result = await client.callTool({ name, arguments: args }) as { structuredContent: any; isError: boolean }
        expect(result.isError, JSON.stringify(result.structuredContent)).toBe(false)
        return result.structuredContent.output
      }
      const listed = await client.listTools()
      for (const name of ["ocx_runs", "ocx_read"]) expect(listed.tools.find((t) => t.name === name)?.annotations?.readOnlyHint).toBe(true)
      const { process: base, objective: _objective, ...rest } = shellRun(world, "echo agent-was-here >&2; exit 0", { user: users.stranger.login })
      const created = await callTool("ocx_create", { title: "an agent's run", node: users.node.login, objective: "say hello", fields: { ...rest, process: base } })
      const run = created.run as string
      const over = await waitFor(async () => {
        const listed = await callTool("ocx_runs", { state: "over" })
        return listed.runs.find((r: { run: string }) => r.run === run)
      }, 60_000, 300)
      expect(over).toMatchObject({ state: "ended", outcome: "exited", exit: 0 })
      const kept = await waitFor(async () => {
        const record = await callTool("ocx_read", { what: run })
        return record.posts.find((p: { kind: string }) => p.kind === "kept logs")
      }, 60_000, 300)
      expect(kept.text).toContain("agent-was-here")
    } finally {
      await client.close()
    }
  }, 120_000)
})
