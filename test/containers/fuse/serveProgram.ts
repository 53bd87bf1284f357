/**
 * What the FUSE tests run where a container proxy would run (inside a bwrap sandbox with a
 * busybox rootfs, or on the host): it makes the mounts it is told with `mountFuse`, sends every
 * ask to the test over a Unix socket and hands the test's answer back, and runs the test's
 * shell scripts beside its mounts. Bundled by the test (esbuild) and run by the host's Node.
 * The socket's messages: socketMessages.ts.
 */
import { spawn } from "node:child_process"
import * as Net from "node:net"
import { mountFuse, type FuseMount } from "../../../src/containers/fuse/Mount.js"
import { Message, onMessages, sendMessage } from "./socketMessages.js"

const [socketPath, mountsJson] = process.argv.slice(2)
const socket = Net.connect(socketPath!)
const waiting = new Map<number, (answer: Buffer) => void>()
let next = 1
const mounts = new Map<string, FuseMount>()

const event = (value: unknown): void => sendMessage(socket, Message.event, 0, Buffer.from(JSON.stringify(value)))

const ask = (request: Buffer): Promise<Buffer | undefined> =>
  new Promise((resolve) => {
    const number = next++
    waiting.set(number, resolve)
    sendMessage(socket, Message.ask, number, request)
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

onMessages(socket, (type, number, payload) => {
  if (type === Message.answer) {
    waiting.get(number)?.(payload)
    waiting.delete(number)
  } else if (type === Message.command) void command(JSON.parse(payload.toString()) as { run?: string })
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
