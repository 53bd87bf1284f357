// A vitest setup file for bench/suite: what each test file cost, appended to $OCX2_SUITE_COST as
// a JSON line when the file ends. The machine's CPU (every process, from /proc/stat) is what a
// file cost only while it runs alone (bench/suite runs one file at a time): most of a file's
// work is in the programs and servers it starts, which its worker's own usage does not count.
import * as Fs from "node:fs"
import { afterAll, beforeAll } from "vitest"
import { machineBusySeconds } from "./machineCpu.js"

const own = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}

let file = ""
let started = 0
let before = machineBusySeconds()
let ownBefore = 0

beforeAll((suite) => {
  file = "filepath" in suite ? suite.filepath : suite.file.filepath
  started = Date.now()
  before = machineBusySeconds()
  ownBefore = own()
})

afterAll(() => {
  const after = machineBusySeconds()
  const line = {
    file,
    wall: (Date.now() - started) / 1000,
    cpu: after - before,
    worker: own() - ownBefore
  }
  const out = process.env.OCX2_SUITE_COST
  if (out !== undefined) Fs.appendFileSync(out, JSON.stringify(line) + "\n")
})
