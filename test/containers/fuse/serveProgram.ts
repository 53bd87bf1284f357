/**
 * What the FUSE tests run where a container proxy would run (inside a bwrap sandbox with a
 * busybox rootfs, or on the host): it makes the mounts it is told with `mountFuse`, sends every
 * ask to the test over a Unix socket and hands the test's answer back, and runs the test's
 * shell scripts beside its mounts. Bundled by the test (esbuild) and run by the host's Node.
 *
 * The socket carries messages `[length: u32][type: u8][number: u32][payload]`: ask (1, to the
 * test) and answer (2, to here) by number; command (3, JSON, to here) and event (4, JSON, to the
 * test).
 */
import { spawn } from "node:child_process"
import * as Net from "node:net"
import { mountFuse, type FuseMount } from "../../../src/containers/fuse/Mount.js"

const [socketPath, mountsJson] = process.argv.slice(2)
const socket = Net.connect(socketPath!)
const waiting = new Map<number, (answer: Buffer) => void>()
let next = 1
const mounts = new Map<string, FuseMount>()

const send = (type: number, number: number, payload: Buffer): void => {
  const head = Buffer.alloc(9)
  head.writeUInt32BE(5 + payload.length, 0)
  head[4] = type
  head.writeUInt32BE(number, 5)
  socket.write(Buffer.concat([head, payload]))
}
const event = (value: unknown): void => send(4, 0, Buffer.from(JSON.stringify(value)))

const ask = (request: Buffer): Promise<Buffer | undefined> =>
  new Promise((resolve) => {
    const number = next++
    waiting.set(number, resolve)
    send(1, number, request)
  })

const run = (script: string): Promise<{ code: number | null; out: string }> =>
  new Promise((resolve) => {
    const child = spawn("/bin/sh", ["-c", script], { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    child.stdout.on("data", (d: Buffer) => (out += d.toString()))
    child.stderr.on("data", (d: Buffer) => (out += d.toString()))
    child.on("close", (code) => resolve({ code, out }))
  })

const command = async (c: { run?: string; unmount?: string; exit?: true }): Promise<void> => {
  if (c.run !== undefined) return event({ ran: await run(c.run) })
  if (c.unmount !== undefined) {
    const m = mounts.get(c.unmount)!
    await m.unmount()
    return event({ unmounted: c.unmount })
  }
  if (c.exit === true) process.exit(0)
}

let pending = Buffer.alloc(0)
socket.on("data", (data: Buffer) => {
  pending = Buffer.concat([pending, data])
  while (pending.length >= 4 && pending.length >= 4 + pending.readUInt32BE(0)) {
    const length = pending.readUInt32BE(0)
    const type = pending[4]!
    const number = pending.readUInt32BE(5)
    const payload = pending.subarray(9, 4 + length)
    pending = pending.subarray(4 + length)
    if (type === 2) {
      waiting.get(number)?.(payload)
      waiting.delete(number)
    } else if (type === 3) void command(JSON.parse(payload.toString()) as { run?: string })
  }
})

socket.on("connect", async () => {
  try {
    for (const m of JSON.parse(mountsJson!) as Array<{ id: string; target: string; kind: "file" | "directory" }>) {
      mounts.set(m.target, await mountFuse({ ...m, ask }))
    }
    event({ mounted: [...mounts.keys()], pid: process.pid })
  } catch (e) {
    event({ error: e instanceof Error ? e.message : String(e) })
  }
})
