import { describe, expect, it } from "vitest"
import { askPrefix, decodeAnswer, decodeAsk, decodeList, decodeStat, encodeAsk, encodeList, encodeStat, errnoAnswer, okAnswer, type Ask } from "../../../src/containers/fuse/Ask.js"
import { Inodes } from "../../../src/containers/fuse/Inodes.js"
import { Requests } from "../../../src/containers/fuse/Requests.js"

describe("FUSE asks: the encoding both sides share", () => {
  it("every op travels and comes back as it was, behind its mount's id", () => {
    const asks: Array<Ask> = [
      { op: "stat", path: "" },
      { op: "list", path: "a/b" },
      { op: "read", path: "f", offset: 1n << 40n, size: 131072 },
      { op: "write", path: "f", offset: 5n, data: Buffer.from([0, 1, 2, 255]) },
      { op: "create", path: "n", mode: 0o640 },
      { op: "mkdir", path: "d", mode: 0o755 },
      { op: "unlink", path: "x" },
      { op: "rmdir", path: "d" },
      { op: "rename", path: "a", to: "b/c", flags: 1 },
      { op: "setattr", path: "f", set: { mask: 2 | 8, mode: 0, uid: 0, gid: 0, size: 3n, atimeNs: 0n, mtimeNs: 1_700_000_000_000_000_001n } },
      { op: "fsync", path: "f", datasync: true },
      { op: "statfs", path: "" },
      { op: "readlink", path: "l" }
    ]
    for (const ask of asks) {
      const wire = encodeAsk(askPrefix("mount-é"), ask)
      expect(wire[0]).toBe(16)
      expect(wire.readUInt16BE(1)).toBe(Buffer.byteLength("mount-é"))
      expect(decodeAsk(wire)).toEqual({ id: "mount-é", ask })
    }
    expect(() => decodeAsk(Buffer.concat([encodeAsk(askPrefix("m"), { op: "stat", path: "" }), Buffer.of(0)]))).toThrow(/past its end/)
    expect(() => decodeAsk(Buffer.from([16, 0, 1, 109, 99]))).toThrow(/no such op/)
  })

  it("answers: data after 0x00, an errno after 0x01; anything else, and a bare finish, is EIO", () => {
    const stat = { kind: "file" as const, mode: 0o644, size: 12n, mtimeNs: 5n }
    const answer = decodeAnswer(okAnswer(encodeStat(stat)))
    expect(answer.ok && decodeStat(answer.data)).toEqual(stat)
    expect(decodeList(encodeList([{ name: "a", kind: "directory" }, { name: "ü", kind: "symlink" }]))).toEqual([{ name: "a", kind: "directory" }, { name: "ü", kind: "symlink" }])
    expect(decodeAnswer(errnoAnswer(13))).toEqual({ ok: false, errno: 13 })
    expect(decodeAnswer(undefined)).toEqual({ ok: false, errno: 5 })
    expect(decodeAnswer(Buffer.from([7]))).toEqual({ ok: false, errno: 5 })
    expect(decodeAnswer(Buffer.from([1, 0]))).toEqual({ ok: false, errno: 5 })
  })
})

describe("the inode table", () => {
  it("a node lives from its lookup to the forget of its last lookup; ids are never reused", () => {
    const t = new Inodes()
    const a = t.lookedUp("a")
    expect(t.lookedUp("a").id).toBe(a.id)
    t.forget(a.id, 1n)
    expect(t.get(a.id)).toBe(a)
    t.forget(a.id, 1n)
    expect(t.get(a.id)).toBeUndefined()
    expect(t.lookedUp("a").id).not.toBe(a.id)
    t.forget(1n, 100n)
    expect(t.get(1n)?.path).toBe("")
  })

  it("a rename moves the node and everything under it; an exchange swaps two trees; a removal detaches", () => {
    const t = new Inodes()
    const d = t.lookedUp("d")
    const f = t.lookedUp("d/f")
    const deep = t.lookedUp("d/e/g")
    const other = t.lookedUp("dx")
    const target = t.lookedUp("z")
    t.move("d", "z")
    expect([d.path, f.path, deep.path, other.path]).toEqual(["z", "z/f", "z/e/g", "dx"])
    expect(target.detached).toBe(true)
    expect(t.lookedUp("z/f").id).toBe(f.id)
    t.exchange("z", "dx")
    expect([d.path, f.path, other.path]).toEqual(["dx", "dx/f", "z"])
    expect(t.lookedUp("z").id).toBe(other.id)
    t.detach("dx/f")
    expect(f.detached).toBe(true)
    expect(t.lookedUp("dx/f").id).not.toBe(f.id)
  })
})

describe("the requests from the helper's pipe", () => {
  it("are cut by the length each starts with, however the pipe splits them", () => {
    const request = (n: number, fill: number) => {
      const b = Buffer.alloc(n, fill)
      b.writeUInt32LE(n, 0)
      return b
    }
    const all = Buffer.concat([request(40, 1), request(70000, 2), request(48, 3)])
    for (const cut of [1, 3, 41, 65536, all.length]) {
      const got: Array<Buffer> = []
      const r = new Requests((b) => got.push(Buffer.from(b)))
      for (let at = 0; at < all.length; at += cut) r.push(all.subarray(at, at + cut))
      expect(got.map((b) => [b.length, b[4]])).toEqual([[40, 1], [70000, 2], [48, 3]])
    }
  })
})
