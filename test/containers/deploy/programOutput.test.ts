import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it, vi } from "vitest"
import { connect } from "../../../src/containers/Client.js"
import { mintToken } from "../../../src/containers/Server.js"
import { deployCases, dist, tempDir } from "./deployWorld.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 600_000, hookTimeout: 120_000 })

/**
 * A program's output (issue 43; docs/containers.md section 11): a real container's program
 * writes on stdout and stderr; the server keeps both under ROOT/output/IDENTITY/ID and the
 * identity that ran it reads them with containers::output; another identity cannot.
 */
const { sh, world } = deployCases("program-output")

const runRequest = (digest: string) => JSON.stringify({ image: digest, template: "tmpl-1", memory: 256 * 1024 * 1024, disk: 32 * 1024 * 1024 })

/** Runs `script` as alice's container to its end: the world, alice's client, the run and the container's id. */
const ranToEnd = async (script: string) => {
  const image = sh(script)
  const w = await world([image])
  const alice = await w.client()
  const run = alice.run(runRequest(image.digest))
  const first = await run.first
  expect(first).toMatchObject({ kind: "id" })
  await run.finished
  return { w, alice, run, id: (first as { id: string }).id }
}

describe("a container program's output", () => {
  it("is kept, stdout and stderr apart, and read by the identity that ran it only", async () => {
    const { w, alice, run, id } = await ranToEnd("echo to stdout; echo to stderr >&2; echo more to stdout; exit 3")
    expect(run.later.map((p) => p.subarray(1).toString("utf8"))).toEqual(["the program ended with exit status 3"])
    // the run ended: its container was stopped, so both streams reached their end
    expect((await alice.output(id, "stdout")).toString("utf8")).toBe("to stdout\nmore to stdout\n")
    expect((await alice.output(id, "stderr")).toString("utf8")).toBe("to stderr\n")
    const bob = await connect(w.url, mintToken(w.root, "bob"))
    try {
      await expect(bob.output(id, "stdout")).rejects.toThrow(/you ran no container/)
      await expect(bob.output(id, "stderr")).rejects.toThrow(/you ran no container/)
    } finally {
      bob.close()
    }
  })

  it("is printed by `ocx2 containers output ID` for the identity that ran it, stdout or --stream stderr, byte for byte", async () => {
    const { w, id } = await ranToEnd("printf 'no newline at the end'; printf 'line one\\nline two\\n' >&2")
    const dir = tempDir("output-cli")
    try {
      const tokenOf = (identity: string) => {
        const file = Path.join(dir, `${identity}.token`)
        Fs.writeFileSync(file, mintToken(w.root, identity))
        return file
      }
      const alices = tokenOf("alice")
      // spawned, not spawnSync: the server is in this process, and must go on answering
      const ocx2 = (token: string, ...args: Array<string>) =>
        new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
          const child = spawn(process.execPath, [Path.join(dist, "ocx2.mjs"), "containers", "output", ...args, "--server", w.url, "--token-file", token], { stdio: ["ignore", "pipe", "pipe"] })
          let stdout = ""
          let stderr = ""
          child.stdout!.on("data", (d: Buffer) => (stdout += d.toString("utf8")))
          child.stderr!.on("data", (d: Buffer) => (stderr += d.toString("utf8")))
          child.once("close", (status) => resolve({ status, stdout, stderr }))
        })
      const out = await ocx2(alices, id)
      expect(out.status, out.stderr).toBe(0)
      expect(out.stdout).toBe("no newline at the end")
      const err = await ocx2(alices, id, "--stream", "stderr")
      expect(err.status, err.stderr).toBe(0)
      expect(err.stdout).toBe("line one\nline two\n")
      // another identity, an id never sent, a stream that is not one
      const bobs = await ocx2(tokenOf("bob"), id)
      expect(bobs.status).toBe(1)
      expect(bobs.stderr).toContain(`you ran no container "${id}" whose output is kept`)
      expect((await ocx2(alices, "no-such-id")).stderr).toContain("you ran no container")
      const bad = await ocx2(alices, id, "--stream", "stdin")
      expect(bad.status).toBe(2)
      expect(bad.stderr).toContain("--stream takes stdout or stderr")
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
