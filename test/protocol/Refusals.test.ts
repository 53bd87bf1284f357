import { describe, expect, it } from "vitest"
import * as Either from "effect/Either"
import { readMessage } from "../../src/protocol/Envelope.js"
import {
  checkRun,
  decodeCapabilityR,
  endedOfRefusal,
  providesAll,
  refusal,
  stepFailed,
  type CapabilityR,
  type CheckInput
} from "../../src/protocol/Refusals.js"
import { buildBlock, checkInput, edited, fakeResolve, host, ROOT, RUN_HASH, sessionBlock, sessionText } from "./fixtures.js"

const noteOf = (input: CheckInput) => {
  const result = checkRun(input)
  return Either.isLeft(result) ? `${result.left.number}: ${result.left.note}` : "passes"
}
const WS = `${ROOT}/builder/projects/lab/${RUN_HASH}`
const capR: CapabilityR = Either.getOrThrow(
  decodeCapabilityR({
    network: false,
    linux_capabilities: [],
    read_only: ["/usr", "/bin", "/lib", "/lib64", "/etc"],
    limits: { wall: "2h", cpu: 3600, processes: 256, file_size: "1G", memory: "4G" }
  })
)
const rSender = { login: "rita", capabilities: "Rei" }
/** the build run as an R sender may send it */
const rBuild = () =>
  edited(buildBlock(), (b) => {
    b.run.sandbox.read_only = ["/usr", "/etc/alternatives", "/lib/x86_64", "$$release$$"]
    b.run.limits = { wall: "1h", cpu: 3000, processes: 256, file_size: "1G", memory: "2G" }
  })
const asR = (block: Record<string, unknown>, cap: CapabilityR | "absent" = capR) =>
  noteOf(checkInput(block, { sender: rSender, host: { ...host, capabilityR: cap === "absent" ? undefined : cap } }))

describe("the two runs of 2.19 pass every check as written", () => {
  it("the build", () => {
    const result = checkRun(checkInput(buildBlock()))
    expect(Either.isRight(result)).toBe(true)
    if (Either.isRight(result)) {
      expect(result.right.to).toBe("lab-2")
      expect(result.right.plan.values.workspace?.text).toBe(WS)
    }
  })
  it("the session, read out of a post's text, sent by setup", () => {
    const message = readMessage(sessionText())
    expect(message._tag).toBe("Message")
    if (message._tag !== "Message") return
    const result = checkRun(checkInput(message.block as Record<string, unknown>, { sender: { login: "sam", capabilities: "s" }, processUserCapabilities: "i" }))
    expect(Either.isRight(result)).toBe(true)
  })
})

describe("refusal 1: the sender", () => {
  it("an unknown sender", () => {
    expect(noteOf(checkInput(buildBlock(), { sender: undefined }))).toBe("1: the server has not said who sent it")
  })
  it("a sender holding none of a, s and R", () => {
    expect(noteOf(checkInput(buildBlock(), { sender: { login: "eve", capabilities: "eiow" } }))).toBe(
      "1: its sender eve holds none of admin (a), setup (s) and R"
    )
  })
  it("the run's to sent it, even holding admin", () => {
    expect(noteOf(checkInput(buildBlock(), { sender: { login: "lab-2", capabilities: "a" } }))).toBe(
      "1: the run's to (lab-2) sent it"
    )
  })
  it("an R sender, on a host with no capability-R.json", () => {
    expect(asR(rBuild(), "absent")).toBe("1: its sender rita holds R, and this host has no ROOT/settings/capability-R.json")
  })
  it("an R sender within capability-R.json passes", () => {
    expect(asR(rBuild())).toBe("passes")
  })
  it("comes before refusal 2", () => {
    expect(noteOf(checkInput({ ocx: 2, to: "lab-2", node: "x", run: {} }, { sender: { login: "eve", capabilities: "" } }))).toMatch(/^1: /)
  })

  const suffix = " (its sender rita holds R alone)"
  it.each([
    ["no sandbox", (b: any) => { delete b.run.sandbox }, "sandbox: R allows no run without a sandbox"],
    ["the network", (b: any) => (b.run.sandbox.network = true), "sandbox.network: R does not allow the network"],
    ["a Linux capability", (b: any) => (b.run.sandbox.linux_capabilities = ["CAP_NET_RAW"]), "sandbox.linux_capabilities[0]: R does not allow CAP_NET_RAW"],
    ["a home", (b: any) => (b.run.sandbox.homes = ["/home/rita/.claude"]), "sandbox.homes: R allows no home"],
    ["a password step", (b: any) => b.run.workspace.push({ step: "password" }), "workspace[2] (password): R allows no password step"],
    ["a path with ..", (b: any) => (b.run.workspace[1].into = "$$workspace$$/../x"), "workspace[1].into: R allows no path with .."],
    ["a read path with ..", (b: any) => (b.run.sandbox.read_only = ["/usr/../root"]), "sandbox.read_only[0]: R allows no path with .."],
    ["a directory not ending in $$run$$", (b: any) => (b.run.workspace[0].at = "$$root$$/rita/shared"), "workspace[0].at: R allows only a directory whose path ends in $$run$$"],
    ["a path to read outside", (b: any) => b.run.sandbox.read_only.push("/root"), "sandbox.read_only[4]: R allows reading only its own $$workspace$$, $$release$$ and /usr, /bin, /lib, /lib64, /etc"],
    ["a path to read in ROOT", (b: any) => b.run.sandbox.read_only.push("$$root$$/other"), "sandbox.read_only[4]: R allows reading only its own $$workspace$$, $$release$$ and /usr, /bin, /lib, /lib64, /etc"],
    ["a path to write outside", (b: any) => b.run.sandbox.read_write.push("/tmp"), "sandbox.read_write[1]: R allows writing only within its own $$workspace$$"],
    ["a capped limit left out", (b: any) => delete b.run.limits.memory, "limits.memory: R caps it at 4G and the run leaves it out"],
    ["a limit above its cap", (b: any) => (b.run.limits.wall = "3h"), "limits.wall: 3h is above R's cap of 2h"],
    ["cpu above its cap", (b: any) => (b.run.limits.cpu = 3601), "limits.cpu: 3601 is above R's cap of 3600"],
    ["file_size above its cap", (b: any) => (b.run.limits.file_size = "1025M"), "limits.file_size: 1025M is above R's cap of 1G"]
  ])("an R sender asking %s", (_, edit, note) => {
    expect(asR(edited(rBuild(), edit))).toBe(`1: ${note}${suffix}`)
  })

  it("an R sender may read through a link into a listed path, not out of one", () => {
    expect(asR(edited(rBuild(), (b) => b.run.sandbox.read_only.push("/lib/x")))).toBe("passes") // /lib -> /usr/lib
    expect(asR(edited(rBuild(), (b) => b.run.sandbox.read_only.push("/home/agent/link-to-care")))).toMatch(/^1: sandbox.read_only\[4\]/)
  })

  it("capability-R.json: absent keys allow nothing and cap nothing", () => {
    const empty = Either.getOrThrow(decodeCapabilityR({}))
    expect(empty).toEqual({ network: false, linux_capabilities: [], read_only: [], limits: {} })
    const plain = edited(rBuild(), (b) => {
      b.run.sandbox.read_only = []
      b.run.limits = {}
    })
    expect(asR(plain, empty)).toBe("passes")
    expect(decodeCapabilityR({ network: true, secrets: [] })).toEqual(Either.left("capability-R.json secrets: a key it does not define"))
    expect(Either.isLeft(decodeCapabilityR({ read_only: ["usr"] }))).toBe(true)
    expect(Either.isLeft(decodeCapabilityR({ limits: { wall: "2" } }))).toBe(true)
  })
})

describe("refusal 2: keys", () => {
  it.each([
    [(b: any) => (b.node = "n1"), "2: node: a key version 2 does not define"],
    [(b: any) => delete b.to, "2: to: missing"],
    [(b: any) => (b.run.process.nodes = 2), "2: process.nodes: a key version 2 does not define"],
    [(b: any) => delete b.run.sandbox.tmp, "2: sandbox.tmp: missing"],
    [(b: any) => (b.run.limits.wall = "1 h"), `2: limits.wall: "1 h" is not a whole number and s, m, h or d`],
    [(b: any) => (b.run.limits.memory = "1.5G"), `2: limits.memory: "1.5G" is not a whole number of bytes, or a whole number and K, M or G`],
    [(b: any) => (b.run.process.deliveries = "each"), `2: process.deliveries: "each" is not one of "feed", "start"`],
    [(b: any) => (b.run.process.session = true), "2: process.verdict: a session asks no verdict"]
  ])("mutation %# -> %s", (edit, note) => {
    expect(noteOf(checkInput(edited(buildBlock(), edit)))).toBe(note)
  })
})

describe("refusal 3: steps and placeholders", () => {
  it.each([
    [(b: any) => b.run.workspace.push({ step: "mount" }), `3: workspace[2]: "mount" is not a step kind version 2 has (directory, files, password, clone, checkout, collect)`],
    [(b: any) => b.run.workspace.shift(), "3: workspace[0] (files): needs $$workspace$$, which no step before it sets"],
    [(b: any) => (b.run.process.cwd = "$$clone$$"), "3: process.cwd: $$clone$$ is not set by then"]
  ])("mutation %# -> %s", (edit, note) => {
    expect(noteOf(checkInput(edited(buildBlock(), edit)))).toBe(note)
  })
})

describe("refusal 4: the process user", () => {
  it.each([
    [{ block: edited(buildBlock(), (b) => (b.run.process.user = "lab-2")) }, "4: process.user (lab-2) is the run's to"],
    [{ block: edited(buildBlock(), (b) => (b.run.process.user = "hook-user")) }, "4: process.user (hook-user) is a clone's user"],
    [{ caps: "ae" }, "4: process.user (builder) holds admin or setup"],
    [{ caps: "s" }, "4: process.user (builder) holds admin or setup"],
    [{ caps: undefined }, "4: process.user (builder) is no user of the server"]
  ])("case %# -> %s", (c, note) => {
    const overrides = "caps" in c ? { processUserCapabilities: c.caps } : {}
    expect(noteOf(checkInput("block" in c ? c.block : buildBlock(), overrides))).toBe(note)
  })
})

describe("refusal 5: no sandbox", () => {
  const bare = () => edited(buildBlock(), (b) => delete b.run.sandbox)
  it("is refused without ROOT/settings/unconfined", () => {
    expect(noteOf(checkInput(bare()))).toBe("5: no sandbox, and this host has no ROOT/settings/unconfined")
  })
  it("passes where the host allows it", () => {
    expect(noteOf(checkInput(bare(), { host: { ...host, unconfined: true } }))).toBe("passes")
  })
})

describe("refusal 6: what the host cannot provide", () => {
  it.each([
    ["memory", (b: any) => (b.run.limits.memory = "1G"), "limits.memory"],
    ["processes", () => {}, "limits.processes"],
    ["file_size", () => {}, "limits.file_size"],
    ["cpu", () => {}, "limits.cpu"],
    ["wall", () => {}, "limits.wall"],
    ["sandbox", () => {}, "sandbox"],
    ["network", (b: any) => (b.run.sandbox.network = true), "sandbox.network"],
    ["linux_capabilities", (b: any) => (b.run.sandbox.linux_capabilities = ["CAP_NET_RAW"]), "sandbox.linux_capabilities"],
    ["isolate_terminal", () => {}, "sandbox.isolate_terminal"],
    ["ends_with_parent", () => {}, "sandbox.ends_with_parent"],
    ["session", (b: any) => { b.run.process.session = true; b.run.process.verdict = false }, "process.session"],
    ["terminal", (b: any) => (b.run.process.terminal = true), "process.terminal"]
  ])("a host without %s", (key, edit, named) => {
    const input = checkInput(edited(buildBlock(), edit), { host: { ...host, provides: { ...providesAll, [key]: false } } })
    expect(noteOf(input)).toBe(`6: ${named}: this host cannot provide it`)
  })
  it("a key the run does not use is no refusal", () => {
    const input = checkInput(buildBlock(), { host: { ...host, provides: { ...providesAll, memory: false, network: false } } })
    expect(noteOf(input)).toBe("passes")
  })
})

describe("refusal 7: paths", () => {
  it.each([
    [(b: any) => (b.run.workspace[0].at = "/tmp/$$run$$"), `7: workspace[0].at: /tmp/$$run$$ (/tmp/${RUN_HASH}) lies outside ROOT (/srv/ocx)`],
    [(b: any) => (b.run.workspace[0].at = "$$root$$"), "7: workspace[0].at: $$root$$ (/srv/ocx) holds OCX's own /srv/ocx/clones/lab.fossil"],
    [(b: any) => (b.run.workspace[0].at = "$$root$$/care/$$run$$"), `7: workspace[0].at: $$root$$/care/$$run$$ (/srv/ocx/care/${RUN_HASH}) lies within OCX's own /srv/ocx/care`],
    [(b: any) => (b.run.workspace[0].at = "$$root$$/alice/sneaky/$$run$$"), `7: workspace[0].at: $$root$$/alice/sneaky/$$run$$ (/srv/ocx/settings/${RUN_HASH}) lies within OCX's own /srv/ocx/settings`],
    [(b: any) => (b.run.workspace[1].into = "/tmp/tree"), `7: workspace[1].into: /tmp/tree (/tmp/tree) lies outside $$workspace$$ (${WS})`],
    [(b: any) => (b.run.workspace[1].into = "$$workspace$$/../x"), `7: workspace[1].into: $$workspace$$/../x (/srv/ocx/builder/projects/lab/x) lies outside $$workspace$$ (${WS})`],
    [(b: any) => (b.run.process.unversioned_files[0].at = "/etc/passwd"), `7: process.unversioned_files[0].at: /etc/passwd (/etc/passwd) lies outside $$workspace$$ (${WS})`],
    [(b: any) => b.run.sandbox.read_only.push("/"), "7: sandbox.read_only[2]: / (/) holds OCX's own /srv/ocx/clones/lab.fossil"],
    [(b: any) => b.run.sandbox.read_only.push("/srv"), "7: sandbox.read_only[2]: /srv (/srv) holds OCX's own /srv/ocx/clones/lab.fossil"],
    [(b: any) => b.run.sandbox.read_only.push("/home/agent/link-to-care"), "7: sandbox.read_only[2]: /home/agent/link-to-care (/srv/ocx/care) is OCX's own /srv/ocx/care"],
    [(b: any) => b.run.sandbox.read_only.push("$$root$$/passwords"), "7: sandbox.read_only[2]: $$root$$/passwords (/srv/ocx/passwords) is OCX's own /srv/ocx/passwords"],
    [(b: any) => b.run.sandbox.read_write.push("$$release$$"), "7: sandbox.read_write[1]: $$release$$ (/srv/ocx/releases/v7) is OCX's own /srv/ocx/current"],
    [(b: any) => b.run.sandbox.homes.push("$$release$$/bin"), "7: sandbox.homes[0]: $$release$$/bin (/srv/ocx/releases/v7/bin) lies within OCX's own /srv/ocx/current"],
    [(b: any) => b.run.sandbox.read_write.push("$$root$$/settings/x"), "7: sandbox.read_write[1]: $$root$$/settings/x (/srv/ocx/settings/x) lies within OCX's own /srv/ocx/settings"],
    [(b: any) => (b.run.process.cwd = "$$root$$/care"), "7: process.cwd: $$root$$/care (/srv/ocx/care) is OCX's own /srv/ocx/care"]
  ])("mutation %# -> %s", (edit, note) => {
    expect(noteOf(checkInput(edited(buildBlock(), edit)))).toBe(note)
  })

  it("$$release$$ may be read (also through its link), $$workspace$$ named in every list", () => {
    const ok = edited(buildBlock(), (b) => {
      b.run.sandbox.read_only.push("$$release$$", "$$release$$/bin", "$$workspace$$")
      b.run.sandbox.homes.push("$$workspace$$")
      b.run.process.cwd = "/"
    })
    expect(noteOf(checkInput(ok))).toBe("passes")
  })

  it("a path only partly known at check time is judged by its known directory", () => {
    const run = edited(buildBlock(), (b) => (b.run.sandbox.read_only = ["$$root$$/care/$$checkin$$"]))
    expect(noteOf(checkInput(run))).toBe(`7: sandbox.read_only[0]: $$root$$/care/$$checkin$$ (/srv/ocx/care) is OCX's own /srv/ocx/care`)
    const fine = edited(buildBlock(), (b) => (b.run.sandbox.read_only = ["/opt/builds/$$checkin$$"]))
    expect(noteOf(checkInput(fine))).toBe("passes")
  })
})

describe("refusal 7: of ROOT, a run binds only its own workspace (DECISIONS 14)", () => {
  const ROOT_NOTE = "lies within ROOT (/srv/ocx), which holds OCX's programs and every run's workspace: of it a run binds only its own $$workspace$$ and what lies within it"
  const OTHER_RUN = "2e".repeat(20)
  it.each([
    ["$$workspace$$/..", "read_write", `$$workspace$$/.. (/srv/ocx/builder/projects/lab)`],
    ["$$workspace$$/../../..", "read_write", `$$workspace$$/../../.. (/srv/ocx/builder)`],
    ["$$workspace$$/../../..", "read_only", `$$workspace$$/../../.. (/srv/ocx/builder)`],
    [`$$root$$/builder/projects/lab/${OTHER_RUN}`, "read_only", `$$root$$/builder/projects/lab/${OTHER_RUN} (/srv/ocx/builder/projects/lab/${OTHER_RUN})`],
    [`/srv/ocx/builder/projects/lab/${OTHER_RUN}/tree`, "read_write", `/srv/ocx/builder/projects/lab/${OTHER_RUN}/tree (/srv/ocx/builder/projects/lab/${OTHER_RUN}/tree)`],
    ["$$root$$/builder", "read_only", "$$root$$/builder (/srv/ocx/builder)"],
    ["/srv/ocx/alice", "homes", "/srv/ocx/alice (/srv/ocx/alice)"],
    ["$$workspace$$/$$checkin$$/../..", "read_only", "$$workspace$$/$$checkin$$/../.. (/srv/ocx/builder/projects/lab)"]
  ])("%s in %s is refused, naming it", (path, list, named) => {
    const run = edited(buildBlock(), (b) => b.run.sandbox[list].push(path))
    const index = list === "homes" ? 0 : list === "read_only" ? 2 : 1
    expect(noteOf(checkInput(run))).toBe(`7: sandbox.${list}[${index}]: ${named} ${ROOT_NOTE}`)
  })

  it("a link from outside ROOT into it is followed, and refused the same", () => {
    const resolve = (path: string) => fakeResolve(path.replace(/^\/home\/agent\/all-work(?=\/|$)/, "/srv/ocx/builder"))
    const run = edited(buildBlock(), (b) => b.run.sandbox.read_only.push("/home/agent/all-work/projects"))
    expect(noteOf(checkInput(run, { host: { ...host, resolve } }))).toBe(
      `7: sandbox.read_only[2]: /home/agent/all-work/projects (/srv/ocx/builder/projects) ${ROOT_NOTE}`
    )
  })

  it("its own workspace and what lies within it, however named, and $$release$$ read-only are allowed", () => {
    const run = edited(buildBlock(), (b) => {
      b.run.sandbox.read_write.push("$$workspace$$/sub", "$$workspace$$/sub/../other", "$$tree$$", `$$root$$/builder/projects/lab/${RUN_HASH}/out`)
      b.run.sandbox.read_only.push("$$workspace$$/tree/docs", "$$release$$", "$$workspace$$/$$checkin$$")
      b.run.sandbox.homes.push("$$workspace$$/sub")
    })
    expect(noteOf(checkInput(run))).toBe("passes")
  })

  it("where ROOT is a stand-in (create, for a node elsewhere), what lies within it is not judged", () => {
    const run = edited(buildBlock(), (b) => b.run.sandbox.read_write.push("$$workspace$$/.."))
    expect(noteOf(checkInput(run, { host: { ...host, rootKnown: false } }))).toBe("passes")
  })
})

describe("refusal 7: the host's /proc, and host paths that do not exist (2.8)", () => {
  it.each([
    ["/proc", "is the host's /proc"],
    ["/proc/sys", "lies within the host's /proc"],
    // judged by its known directory, as OCX's own paths are
    ["/proc/$$checkin$$", "is the host's /proc"]
  ])("%s is refused", (path, why) => {
    const run = edited(buildBlock(), (b) => b.run.sandbox.read_only.push(path))
    const known = path.includes("$$") ? "/proc" : path
    expect(noteOf(checkInput(run))).toBe(`7: sandbox.read_only[2]: ${path} (${known}) ${why}`)
  })

  it("a host path to bind that does not exist is refused where the host can say, not within its own workspace", () => {
    const present = new Set(["/usr", "/etc/alternatives", "/opt"])
    const exists = (path: string) => present.has(path)
    const missing = edited(buildBlock(), (b) => b.run.sandbox.homes.push("/opt/missing"))
    expect(noteOf(checkInput(missing, { host: { ...host, exists } }))).toBe(
      "7: sandbox.homes[0]: /opt/missing (/opt/missing) does not exist on this host"
    )
    // where the host cannot be seen, not judged
    expect(noteOf(checkInput(missing))).toBe("passes")
    // what the steps make in the workspace does not exist yet, and a path known only later is judged later
    const later = edited(buildBlock(), (b) => {
      b.run.sandbox.read_only.push("$$tree$$/docs", "/opt/$$checkin$$")
      b.run.sandbox.read_write.push("$$workspace$$/out")
    })
    expect(noteOf(checkInput(later, { host: { ...host, exists } }))).toBe("passes")
  })
})

describe("order and helpers", () => {
  it("the first refusal that holds is the one (4 before 5 before 6 before 7)", () => {
    const many = edited(buildBlock(), (b) => {
      b.run.process.user = "lab-2"
      delete b.run.sandbox
      b.run.process.cwd = "$$root$$/care"
    })
    expect(noteOf(checkInput(many))).toMatch(/^4: /)
    expect(noteOf(checkInput(many, { processUserCapabilities: "e", cloneUsers: new Set() }))).toMatch(/^4: /)
  })
  it("refusal 8 and the ended of a refusal", () => {
    expect(stepFailed(1, "files", "no check-in named trunk")).toEqual(refusal(8, "workspace[1] (files) failed: no check-in named trunk"))
    expect(endedOfRefusal(refusal(6, "limits.memory: this host cannot provide it"))).toEqual({
      outcome: "refused",
      note: "refusal 6: limits.memory: this host cannot provide it"
    })
  })
  it("the session example names the process user as written", () => {
    expect(noteOf(checkInput(sessionBlock(), { processUserCapabilities: undefined }))).toBe("4: process.user (agent) is no user of the server")
  })
})
