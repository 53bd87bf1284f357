import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterEach, describe, expect, it, vi } from "vitest"
import { Answer, Endpoint } from "../../src/containers/Wire.js"
import { makeWorld, type World } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/** volumes::list, create and the six operations (docs/containers.md sections 3 and 6), over the wire. */
let world: World | undefined
afterEach(async () => {
  await world?.close()
  world = undefined
})

const text = (r: { responses: ReadonlyArray<Buffer> }) => r.responses.map((p) => `${p[0]}:${p.subarray(1).toString("utf8")}`)

describe("volumes", () => {
  it("create, list (per identity, by name), write, read, stat, filetree, edit, delete", async () => {
    world = await makeWorld()
    const alice = await world.client("alice")
    const bob = await world.client("bob")
    await alice.volumesCreate("zeta", "ephemeral")
    await alice.volumesCreate("alpha", "persistent")
    await bob.volumesCreate("alpha", "read_only")
    expect(await alice.volumesList()).toEqual([{ name: "alpha", mode: "persistent" }, { name: "zeta", mode: "ephemeral" }])
    expect(await bob.volumesList()).toEqual([{ name: "alpha", mode: "read_only" }])
    await expect(alice.volumesCreate("alpha", "persistent")).rejects.toThrow("exists")

    await alice.volumesWrite("alpha", "hello.txt", Buffer.from("hello world"))
    const big = Buffer.alloc(200_000, 3)
    await alice.volumesWrite("alpha", "big", big)
    expect((await alice.volumesRead("alpha", "hello.txt")).toString()).toBe("hello world")
    expect(await alice.volumesRead("alpha", "big")).toEqual(big)
    await expect(bob.volumesRead("alpha", "hello.txt")).rejects.toThrow("has no")

    const stat = JSON.parse((await alice.operation(Endpoint.volumesStat, { volume: "alpha", path: "hello.txt" })).responses[0]!.toString("utf8", 1))
    expect(stat).toMatchObject({ kind: "file", size: 11 })
    Fs.mkdirSync(Path.join(world.root, "volumes/alice/alpha/data/dir"))
    await alice.volumesWrite("alpha", "dir/inner", Buffer.from("x"))
    const tree = JSON.parse((await alice.operation(Endpoint.volumesFiletree, { volume: "alpha" })).responses[0]!.toString("utf8", 1))
    expect(tree.map((e: { path: string; kind: string }) => `${e.kind} ${e.path}`)).toEqual(["file big", "directory dir", "file dir/inner", "file hello.txt"])

    expect(text(await alice.operation(Endpoint.volumesEdit, { volume: "alpha", path: "hello.txt", old: "world", new: "there" }))).toEqual(["0:"])
    expect((await alice.volumesRead("alpha", "hello.txt")).toString()).toBe("hello there")
    expect(text(await alice.operation(Endpoint.volumesEdit, { volume: "alpha", path: "hello.txt", old: "nothing", new: "x" }))[0]).toContain("does not contain")

    expect(text(await alice.operation(Endpoint.volumesDelete, { volume: "alpha", path: "dir" }))).toEqual(["0:"])
    expect(text(await alice.operation(Endpoint.volumesDelete, { volume: "alpha" }))).toEqual(["0:"])
    expect(await alice.volumesList()).toEqual([{ name: "zeta", mode: "ephemeral" }])
    expect(world.parts.holds.isEmpty).toBe(true)
  })

  it("a path out of the volume, a bad name or a bad body: refused or not decoded, and never followed", async () => {
    world = await makeWorld()
    const alice = await world.client("alice")
    await alice.volumesCreate("v", "persistent")
    Fs.symlinkSync("/etc", Path.join(world.root, "volumes/alice/v/data/out"))
    const escaped = await alice.operation(Endpoint.volumesRead, { volume: "v", path: "out/hostname" })
    expect(escaped.responses[0]![0]).toBe(Answer.error)
    expect(escaped.responses[0]!.toString("utf8", 1)).toContain("out of the volume")
    await expect(alice.volumesWrite("v", "out/evil", Buffer.from("x"))).rejects.toThrow("out of the volume")
    // not decoded: a bare finish
    for (const body of [{ volume: "v", path: "../x" }, { volume: "../v", path: "x" }, { volume: "v" }, { volume: "v", path: "x", more: 1 }]) {
      expect((await alice.operation(Endpoint.volumesRead, body)).responses, JSON.stringify(body)).toEqual([])
    }
    expect((await alice.call(Endpoint.volumesCreate, JSON.stringify({ name: "w", mode: "forever" }))).responses).toEqual([])
    expect((await alice.call(Endpoint.volumesList, "[]")).responses).toEqual([])
    for (const reserved of [0, 2, 11, 13, 15, 255]) expect((await alice.call(reserved, "{}")).responses, String(reserved)).toEqual([])
  })

  it("ephemeral volumes are emptied when the server starts; the others are kept", async () => {
    world = await makeWorld()
    const alice = await world.client("alice")
    await alice.volumesCreate("e", "ephemeral")
    await alice.volumesCreate("p", "persistent")
    await alice.volumesWrite("e", "f", Buffer.from("gone"))
    await alice.volumesWrite("p", "f", Buffer.from("kept"))
    world.parts.volumes.emptyEphemeral()
    expect(Fs.readdirSync(Path.join(world.root, "volumes/alice/e/data"))).toEqual([])
    expect((await alice.volumesRead("p", "f")).toString()).toBe("kept")
  })
})
