// A vitest setup file for bench/suite: what each test file cost, appended to $OCX2_SUITE_COST as
// a JSON line when the file ends. The machine's CPU (every process, from /proc/stat) is what a
// file cost only while it runs alone (bench/suite runs one file at a time): most of a file's
// work is in the programs and servers it starts, which its worker's own usage does not count.
import * as Fs from "node:fs"
import { afterAll, beforeAll } from "vitest"

const machine = () => {
  const lines = Fs.readFileSync("/proc/stat", "utf8").split("\n")
  // user nice system idle iowait irq softirq: busy is all but idle and iowait, in clock ticks (100 a second)
  const f = lines[0]!.trim().split(/\s+/).slice(1).map(Number)
  const busy = (f[0]! + f[1]! + f[2]! + f[5]! + f[6]!) / 100
  const forks = Number(lines.find((l) => l.startsWith("processes "))?.split(" ")[1] ?? 0)
  return { busy, forks }
}
const own = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}

let file = ""
let started = 0
let before = machine()
let ownBefore = 0

beforeAll((suite) => {
  file = "filepath" in suite ? suite.filepath : suite.file.filepath
  started = Date.now()
  before = machine()
  ownBefore = own()
})

afterAll(() => {
  const after = machine()
  const line = {
    file,
    wall: (Date.now() - started) / 1000,
    cpu: after.busy - before.busy,
    worker: own() - ownBefore,
    // clone(2) calls, threads included: a program's start is about ten
    forks: after.forks - before.forks
  }
  const out = process.env.OCX2_SUITE_COST
  if (out !== undefined) Fs.appendFileSync(out, JSON.stringify(line) + "\n")
})
