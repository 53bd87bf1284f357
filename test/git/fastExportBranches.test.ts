import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { firstParentBranches, readNoFollow, relabelStream } from "../../src/git/FastExportBranches.js"

const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-fast-export-"))
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

const relabel = (stream: Buffer, labels: ReadonlyMap<string, string>): Buffer => {
  const input = Path.join(dir, `in-${Math.random()}`)
  const output = `${input}.out`
  Fs.writeFileSync(input, stream)
  relabelStream(input, output, labels)
  return Fs.readFileSync(output)
}

describe("the branches of an imported history", () => {
  it("a commit belongs to the first first-parent line that holds it, the upstream's own branch (master) first", () => {
    const listing = ["#main", "m2", "c1", "#feature", "f1", "c1", "#other", "o1", "m2", "c1", ""].join("\n")
    const labels = firstParentBranches(listing, "main")
    expect([...labels]).toEqual([["m2", "master"], ["c1", "master"], ["f1", "feature"], ["o1", "other"]])
  })

  it("renames each commit's ref by its original id, drops original-oid lines, and copies data by its length, byte for byte", () => {
    // a message that looks like commands, and a path and a blob that are not UTF-8
    const message = Buffer.from("commit refs/heads/evil\noriginal-oid c1\ndata 3\n")
    const blob = Buffer.from([0xff, 0xfe, 0x0a, 0x00, 0x80])
    const stream = Buffer.concat([
      Buffer.from("blob\nmark :1\noriginal-oid b1\n"), Buffer.from(`data ${blob.length}\n`), blob, Buffer.from("\n"),
      Buffer.from("reset refs/heads/other\n"),
      Buffer.from("commit refs/heads/other\nmark :2\noriginal-oid c1\nauthor A <a@b> 1 +0000\ncommitter A <a@b> 1 +0000\n"),
      Buffer.from(`data ${message.length}\n`), message,
      Buffer.from("M 100644 :1 "), Buffer.from([0x70, 0xe9, 0x0a]),
      Buffer.from("\ncommit refs/heads/feature\nmark :3\noriginal-oid c9\nfrom :2\ndata 0\n\n"),
      Buffer.from("tag v2\nfrom :2\noriginal-oid t1\ntagger A <a@b> 1 +0000\ndata 0\n")
    ])
    const out = relabel(stream, new Map([["c1", "master"]]))
    const expected = Buffer.concat([
      Buffer.from("blob\nmark :1\n"), Buffer.from(`data ${blob.length}\n`), blob, Buffer.from("\n"),
      Buffer.from("reset refs/heads/other\n"),
      Buffer.from("commit refs/heads/master\nmark :2\nauthor A <a@b> 1 +0000\ncommitter A <a@b> 1 +0000\n"),
      Buffer.from(`data ${message.length}\n`), message,
      Buffer.from("M 100644 :1 "), Buffer.from([0x70, 0xe9, 0x0a]),
      // a commit not in the labels keeps the ref git gave it
      Buffer.from("\ncommit refs/heads/feature\nmark :3\nfrom :2\ndata 0\n\n"),
      Buffer.from("tag v2\nfrom :2\ntagger A <a@b> 1 +0000\ndata 0\n")
    ])
    expect(out.equals(expected), out.toString("latin1")).toBe(true)
  })

  it("follows no link the sandbox left: a linked stream is refused, a linked output replaced, never written through", () => {
    const outside = Path.join(dir, "outside")
    Fs.writeFileSync(outside, "the host's file\n")
    const linkedIn = Path.join(dir, "linked-in")
    Fs.symlinkSync(outside, linkedIn)
    expect(() => relabelStream(linkedIn, Path.join(dir, "out-a"), new Map())).toThrow(/ELOOP/)
    const input = Path.join(dir, "plain-in")
    Fs.writeFileSync(input, "reset refs/heads/master\n")
    const linkedOut = Path.join(dir, "linked-out")
    Fs.symlinkSync(outside, linkedOut)
    relabelStream(input, linkedOut, new Map())
    expect(Fs.lstatSync(linkedOut).isSymbolicLink()).toBe(false)
    expect(Fs.readFileSync(linkedOut, "utf8")).toBe("reset refs/heads/master\n")
    expect(Fs.readFileSync(outside, "utf8")).toBe("the host's file\n")
    expect(() => readNoFollow(linkedIn)).toThrow(/ELOOP/)
  })

  it("copies a stream larger than its buffer, and names a stream cut inside a data block", () => {
    const big = Buffer.alloc(300_000, 0x61)
    const stream = Buffer.concat([Buffer.from("blob\nmark :1\noriginal-oid b1\n"), Buffer.from(`data ${big.length}\n`), big, Buffer.from("\n")])
    const out = relabel(stream, new Map())
    expect(out.equals(Buffer.concat([Buffer.from("blob\nmark :1\n"), Buffer.from(`data ${big.length}\n`), big, Buffer.from("\n")]))).toBe(true)
    expect(() => relabel(stream.subarray(0, 1000), new Map())).toThrow(/ends inside a data block/)
  })
})
