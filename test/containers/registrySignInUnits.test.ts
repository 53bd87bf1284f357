import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { parseChallenges, TokenCache } from "../../src/containers/RegistryPolicy.js"
import { parseCredentials, readCredentials } from "../../src/containers/RegistryCredentials.js"

/** The sign-in's parts on their own: challenges, the token cache's lifetimes, the credentials file. */
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-signin-units-"))
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

describe("WWW-Authenticate challenges", () => {
  it("a Bearer challenge's realm, service and scope, quoted strings unescaped; a Basic one beside it", () => {
    const [bearer, basic] = parseChallenges(
      'Bearer realm="https://auth.example.org/token",service="registry.example.org",scope="repository:tools/lint:pull", Basic realm="a \\"quoted\\" realm"'
    )
    expect(bearer!.scheme).toBe("bearer")
    expect(Object.fromEntries(bearer!.params)).toEqual({
      realm: "https://auth.example.org/token",
      service: "registry.example.org",
      scope: "repository:tools/lint:pull"
    })
    expect(basic!.scheme).toBe("basic")
    expect(basic!.params.get("realm")).toBe('a "quoted" realm')
  })
})

describe("the token cache", () => {
  it("keeps a sign-in's authorization until its lifetime runs out, then signs in again; one sign-in under way is shared", async () => {
    let now = 1_000_000
    const cache = new TokenCache(() => now)
    let signIns = 0
    const signIn = (at: number) => {
      signIns++
      return Promise.resolve({ header: `Bearer t${signIns}`, until: at + 60_000 })
    }
    const [a, b] = await Promise.all([cache.signIn("k", signIn), cache.signIn("k", signIn)])
    expect(a).toEqual(b)
    expect(signIns).toBe(1)
    expect(cache.get("k")).toBe("Bearer t1")
    expect(cache.get("other scope")).toBeUndefined()
    now += 59_999
    expect(cache.get("k")).toBe("Bearer t1")
    now += 1
    expect(cache.get("k")).toBeUndefined()
    await cache.signIn("k", signIn)
    expect(cache.get("k")).toBe("Bearer t2")
    cache.drop("k")
    expect(cache.get("k")).toBeUndefined()
  })

  it("a failed sign-in is not kept", async () => {
    const cache = new TokenCache()
    expect(await cache.signIn("k", () => Promise.resolve({ kind: "failed" as const, message: "no" }))).toEqual({ kind: "failed", message: "no" })
    expect(cache.get("k")).toBeUndefined()
  })
})

describe("the credentials file", () => {
  const write = (name: string, text: string, mode: number) => {
    const file = Path.join(dir, `${name}.json`)
    Fs.writeFileSync(file, text, { mode })
    Fs.chmodSync(file, mode)
    return file
  }

  it("usernames and passwords or tokens by host; a missing file is no credentials", () => {
    write("alice", JSON.stringify({ registries: { "Registry.Example.org": { username: "a", password: "p" }, "127.0.0.1:5000": { token: "t" } } }), 0o600)
    const got = readCredentials(dir, "alice")
    expect(typeof got).toBe("object")
    const byHost = (got as Exclude<typeof got, string>).byHost
    expect(byHost.get("registry.example.org")).toEqual({ kind: "basic", username: "a", password: "p" })
    expect(byHost.get("127.0.0.1:5000")).toEqual({ kind: "token", token: "t" })
    expect(readCredentials(dir, "nobody")).toEqual({ file: Path.join(dir, "nobody.json"), byHost: new Map() })
  })

  it("a file its group or others may read or write is refused; a symbolic link is refused", () => {
    for (const mode of [0o644, 0o640, 0o604, 0o620]) {
      const file = write("bob", JSON.stringify({ registries: {} }), mode)
      expect(readCredentials(dir, "bob")).toBe(
        `the registry credentials ${file} may be read or written by others than its owner (mode 0${mode.toString(8)}): it is not used until it is mode 0600 (chmod 600 ${file})`
      )
    }
    write("carol-target", JSON.stringify({ registries: {} }), 0o600)
    Fs.symlinkSync(Path.join(dir, "carol-target.json"), Path.join(dir, "carol.json"))
    expect(readCredentials(dir, "carol")).toMatch(/is a symbolic link/)
  })

  it("a malformed file is named without echoing what it holds", () => {
    for (const [text, why] of [
      ['{"registries": {"h": {"username": "u", "password": "s3cret"', "is not JSON"],
      ['{"registries": {"h": {"username": "u", "password": 7}}}', "lists h with neither"],
      ['{"registries": {"h/x": {"token": "s3cret"}}}', "which is not HOST[:PORT]"],
      ['{"registries": [{"h": {"token": "s3cret"}}]}', 'is not {"registries"']
    ] as const) {
      const got = parseCredentials("F", text)
      expect(got).toEqual(expect.stringContaining(why))
      expect(got).not.toContain("s3cret")
    }
  })
})
