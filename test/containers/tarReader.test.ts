import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { tarEntries } from "../../src/containers/TarReader.js"
import { tar } from "../support/tarBuild.js"

/** The tar reader the unpacker reads layers with, against archives Debian's GNU tar writes in each format. */
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-tar-"))
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

const read = async (bytes: Buffer, pieceSize = 7) => {
  async function* pieces() {
    for (let at = 0; at < bytes.length; at += pieceSize) yield bytes.subarray(at, at + pieceSize)
  }
  const out: Array<string> = []
  for await (const { entry, body } of tarEntries(pieces())) {
    const chunks: Array<Buffer> = []
    for await (const c of body) chunks.push(c)
    out.push(`${entry.type} ${entry.path}${entry.linkname !== "" ? ` -> ${entry.linkname}` : ""} ${Buffer.concat(chunks).toString("utf8")}`)
  }
  return out
}

const longName = `${"d".repeat(60)}/${"e".repeat(60)}/${"f".repeat(70)}`

describe("tarEntries", () => {
  for (const format of ["gnu", "pax", "ustar"]) {
    it(`reads what GNU tar writes as ${format}: long names, symlinks, hard links, bodies split anywhere`, async () => {
      const src = Path.join(dir, format)
      Fs.mkdirSync(Path.join(src, Path.dirname(longName)), { recursive: true })
      Fs.writeFileSync(Path.join(src, longName), "long\n")
      Fs.writeFileSync(Path.join(src, "a"), "A".repeat(1000))
      Fs.symlinkSync("a", Path.join(src, "s"))
      Fs.linkSync(Path.join(src, "a"), Path.join(src, "h"))
      const r = spawnSync("tar", ["-C", src, `--format=${format}`, "--sort=name", "-cf", "-", "a", "h", "s", longName.split("/")[0]!], { maxBuffer: 1 << 24 })
      expect(r.status, r.stderr.toString()).toBe(0)
      const entries = await read(r.stdout)
      expect(entries).toEqual([
        `file a ${"A".repeat(1000)}`,
        "link h -> a ",
        "symlink s -> a ",
        `directory ${longName.split("/")[0]}/ `,
        `directory ${Path.dirname(longName)}/ `,
        `file ${longName} long\n`
      ])
    })
  }

  it("a pax header carries a name longer than ustar's; a header whose checksum is wrong is an error", async () => {
    expect(await read(tar([{ path: longName, type: "file", content: "x" }]), 512)).toEqual([`file ${longName} x`])
    const broken = tar([{ path: "a", type: "file", content: "x" }])
    broken[0] = "b".charCodeAt(0)
    await expect(read(broken)).rejects.toThrow("checksum")
    await expect(read(tar([{ path: "a", type: "file", content: "x" }]).subarray(0, 700))).rejects.toThrow("ends")
  })
})
