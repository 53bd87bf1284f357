// A vitest setup file for bench/suite: what each test file cost, appended to $OCX2_SUITE_COST as
// a JSON line when the file ends. The suite's CPU (every process of its cgroup, exact, from the
// file $OCX2_SUITE_CPU names; the machine's, from /proc/stat, where bench/suite could make no
// cgroup) is what a file cost only while it runs alone (bench/suite runs one file at a time): most
// of a file's work is in the programs and servers it starts, which its worker's own usage does not count.
import * as Fs from "node:fs"
import { afterAll, beforeAll } from "vitest"
import { machineBusySeconds } from "./machineCpu.js"

const usageFile = process.env.OCX2_SUITE_CPU
/** the suite's CPU seconds so far: its cgroup's (nanoseconds in cpuacct.usage), else the machine's */
const suiteBusySeconds = () => (usageFile === undefined ? machineBusySeconds() : Number(Fs.readFileSync(usageFile, "utf8")) / 1e9)

const own = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}

let file = ""
let started = 0
let before = suiteBusySeconds()
let ownBefore = 0

beforeAll((suite) => {
  file = "filepath" in suite ? suite.filepath : suite.file.filepath
  started = Date.now()
  before = suiteBusySeconds()
  ownBefore = own()
})

afterAll(() => {
  const after = suiteBusySeconds()
  const line = {
    file,
    wall: (Date.now() - started) / 1000,
    cpu: after - before,
    worker: own() - ownBefore
  }
  const out = process.env.OCX2_SUITE_COST
  if (out !== undefined) Fs.appendFileSync(out, JSON.stringify(line) + "\n")
})
