// cgroup v2 (issue 12 item 2): the v2 path's decisions, against a directory shaped as the kernel
// shapes cgroup2 (fakeCgroup2.ts), since this host mounts cgroup v1 alone; and that this host's
// real v1 hierarchies still give memory and processes.
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { hostLimits } from "../../src/tools/support/HookSetup.js"
import {
  type CgroupHost, describeController, endLeftovers, LaunchCgroups, leftoverName, probeController, realHost, versionOf
} from "../../src/sandbox/Cgroups.js"
import { baseOf, cgroup2Mount, lookV2, nodeLeaf, ownPath, prepareV2 } from "../../src/sandbox/CgroupsV2.js"
import { FakeCgroup2 } from "./fakeCgroup2.js"

const fakes: Array<FakeCgroup2> = []
afterEach(() => {
  for (const f of fakes.splice(0)) f.remove()
})
const fake = () => {
  const f = new FakeCgroup2()
  fakes.push(f)
  return f
}
/** a host that mounts cgroup2 alone, as the process `pid` in `own` sees it */
const v2Only = (f: FakeCgroup2, own: string, pid: number): CgroupHost => ({ v1: () => undefined, v2: f.host(own, pid) })
const read = (dir: string, name: string) => Fs.readFileSync(Path.join(dir, name), "utf8")
const words = (text: string) => text.split(/\s+/).filter((w) => w !== "")

const unit = "/system.slice/system-ocx2\\x2dnode.slice/ocx2-node@lab.service"

describe("cgroup v2: where a launch's group goes", () => {
  it("reads our own group from the 0:: line and cgroup2's mount from mountinfo", () => {
    expect(ownPath("12:pids:/x\n0::/system.slice/a.service\n")).toBe("/system.slice/a.service")
    expect(ownPath("4:memory:/x\n")).toBeUndefined()
    expect(cgroup2Mount("41 31 0:38 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")).toEqual({ root: "/sys/fs/cgroup", mountRoot: "/" })
    const f = fake()
    expect(baseOf(f.host(unit, 10))).toEqual({ own: Path.join(f.root, unit), base: Path.join(f.root, unit) })
    // in the leaf (systemd's DelegateSubgroup=, or moved there before): the base is its parent
    expect(baseOf(f.host(`${unit}/${nodeLeaf}`, 10))).toEqual({ own: Path.join(f.root, unit, nodeLeaf), base: Path.join(f.root, unit) })
    // a container's mount shows its own group at the mount point
    expect(baseOf({ ...f.host("/lxc/box/inner", 10), mountRoot: "/lxc/box" })).toEqual({ own: Path.join(f.root, "inner"), base: Path.join(f.root, "inner") })
    expect(baseOf({ ...f.host("/elsewhere", 10), mountRoot: "/lxc/box" })).toMatch(/outside the cgroup2 mount/)
  })

  it("v1 where a v1 hierarchy has the controller (as it always was), v2 otherwise", () => {
    const f = fake()
    const mixed: CgroupHost = { v1: (c) => (c === "memory" ? "/sys/fs/cgroup/memory/x" : undefined), v2: f.host("/scope.scope", 10) }
    f.group("/scope.scope", [10])
    expect(versionOf("memory", mixed)).toBe(1)
    expect(versionOf("pids", mixed)).toBe(2)
    expect(describeController("memory", mixed)).toBe("cgroup v1 memory")
    expect(describeController("pids", mixed)).toBe("cgroup v2 pids")
    const none: CgroupHost = { v1: () => undefined, v2: undefined }
    expect(probeController("memory", none)).toBe("no cgroup v1 memory hierarchy is mounted for this process")
    expect(describeController("pids", none)).toBe("not available: no cgroup v1 pids hierarchy is mounted for this process")
  })
})

describe("cgroup v2: a launch's group in a delegated subtree (Delegate=yes)", () => {
  it("moves its group's processes into a leaf, enables the controllers, writes the limits, reads back the OOM kill and the pids, removes the group", () => {
    const f = fake()
    // the node (4242) and a watcher it left running (4243) in the unit's own group, which systemd
    // delegated: its parent gives it every controller, its own subtree_control is empty
    const service = f.group("/system.slice/fossil-server@repo.scope", [4242, 4243])
    const host = v2Only(f, "/system.slice/fossil-server@repo.scope", 4242)
    expect(describeController("memory", host)).toBe("cgroup v2 memory")
    // the look changed nothing
    expect(f.procs(service)).toEqual([4242, 4243])
    expect(read(service, "cgroup.subtree_control")).toBe("")

    const name = leftoverName("run/abc")
    const cgroups = LaunchCgroups.make(name, { pids: true, pidsMax: 10, memoryBytes: 48 << 20 }, host)
    const leaf = Path.join(service, nodeLeaf)
    const run = Path.join(service, name)
    // no internal processes: every process of the group went into the leaf, ours first
    expect(f.procs(service)).toEqual([])
    expect(f.procs(leaf)).toEqual([4242, 4243])
    expect(words(read(service, "cgroup.subtree_control")).sort()).toEqual(["memory", "pids"])
    // one group for both controllers, with the limits: no swap beside memory
    expect(cgroups.dirs()).toEqual([run])
    expect(cgroups.procsFiles()).toEqual([Path.join(run, "cgroup.procs")])
    expect(read(run, "memory.max")).toBe(String(48 << 20))
    expect(read(run, "memory.swap.max")).toBe("0")
    expect(read(run, "pids.max")).toBe("10")

    // the wrapper (forked by the node, so in the leaf) joins, then its command forks
    f.fork(4242, 5000)
    f.io.write(cgroups.procsFiles()[0]!, "5000")
    f.fork(5000, 5001)
    expect(f.procs(leaf)).toEqual([4242, 4243])
    expect([...cgroups.pids()].sort()).toEqual([5000, 5001])
    expect(cgroups.oomKills()).toBe(0)
    // the kernel killed one for memory
    Fs.writeFileSync(Path.join(run, "memory.events"), "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    expect(cgroups.oomKills()).toBe(1)

    // a group with a process is not removed; cgroup.kill ends them all at once
    expect(cgroups.removeNow()).toBe(false)
    expect(cgroups.killAll()).toBe(2)
    expect(f.killed.sort()).toEqual([5000, 5001])
    expect(cgroups.killAll()).toBe(0)
    expect(cgroups.removeNow()).toBe(true)
    expect(Fs.existsSync(run)).toBe(false)
    expect(cgroups.pids()).toEqual([])
    // the node's own processes were never touched
    expect(f.procs(leaf)).toEqual([4242, 4243])
  })

  it("a second launch, and one from a process already in the leaf, change nothing more", () => {
    const f = fake()
    const scope = f.group("/user.slice/run-u7.scope", [300])
    LaunchCgroups.make("ocx2-run-a", { pids: true, pidsMax: undefined, memoryBytes: undefined }, v2Only(f, "/user.slice/run-u7.scope", 300)).removeNow()
    const fromLeaf = v2Only(f, `/user.slice/run-u7.scope/${nodeLeaf}`, 300)
    const b = LaunchCgroups.make("ocx2-run-b", { pids: true, pidsMax: 5, memoryBytes: 1 << 20 }, fromLeaf)
    expect(b.dirs()).toEqual([Path.join(scope, "ocx2-run-b")])
    expect(read(Path.join(scope, "ocx2-run-b"), "pids.max")).toBe("5")
    expect(read(Path.join(scope, "ocx2-run-b"), "memory.max")).toBe(String(1 << 20))
    expect(f.procs(Path.join(scope, nodeLeaf))).toEqual([300])
    expect(b.removeNow()).toBe(true)
    // the first launch enabled pids alone (it asked no memory); the second added memory
    expect(read(scope, "cgroup.subtree_control").trim()).toBe("pids memory")
    expect(f.groups(scope)).toEqual([scope, Path.join(scope, nodeLeaf)])
  })

  it("the memory limit set anew while the group runs (a container's spare, as it is taken): higher or lower, never below what the group holds", () => {
    const f = fake()
    const scope = f.group("/s.scope", [8])
    const c = LaunchCgroups.make("ocx2-run-m", { pids: true, pidsMax: 5, memoryBytes: 48 << 20 }, v2Only(f, "/s.scope", 8))
    const run = Path.join(scope, "ocx2-run-m")
    expect(c.setMemory(96 << 20)).toBeUndefined()
    expect(read(run, "memory.max")).toBe(String(96 << 20))
    expect(read(run, "memory.swap.max")).toBe("0")
    Fs.writeFileSync(Path.join(run, "memory.current"), String(40 << 20))
    expect(c.setMemory(32 << 20)).toBe(`the group holds ${40 << 20} bytes, more than ${32 << 20}`)
    expect(read(run, "memory.max")).toBe(String(96 << 20))
    expect(c.setMemory(64 << 20)).toBeUndefined()
    expect(read(run, "memory.max")).toBe(String(64 << 20))
    expect(c.removeNow()).toBe(true)
  })

  it("pids alone, without a processes limit: pids.max is max and no memory file is written", () => {
    const f = fake()
    const scope = f.group("/s.scope", [8])
    const c = LaunchCgroups.make("ocx2-run-p", { pids: true, pidsMax: undefined, memoryBytes: undefined }, v2Only(f, "/s.scope", 8))
    const run = Path.join(scope, "ocx2-run-p")
    expect(read(run, "pids.max")).toBe("max")
    expect(read(scope, "cgroup.subtree_control").trim()).toBe("pids")
    expect(Fs.existsSync(Path.join(run, "memory.max"))).toBe(false)
    expect(c.oomKills()).toBe(0)
    expect(c.removeNow()).toBe(true)
  })

  it("under systemd's DelegateSubgroup=ocx2-node the unit's group holds no process: the controllers are enabled, nothing moved", () => {
    const f = fake()
    const service = f.group(unit)
    const leaf = f.group(`${unit}/${nodeLeaf}`, [77, 78])
    const host = v2Only(f, `${unit}/${nodeLeaf}`, 77)
    expect(probeController("memory", host)).toBeUndefined()
    expect(probeController("pids", host)).toBeUndefined()
    expect(words(read(service, "cgroup.subtree_control"))).toEqual(["memory", "pids"])
    expect(f.procs(leaf)).toEqual([77, 78])
    // the probe's group is gone
    expect(f.groups(service)).toEqual([service, leaf])
    const c = LaunchCgroups.make("ocx2-run-x", { pids: true, pidsMax: 3, memoryBytes: 2 << 20 }, host)
    expect(c.dirs()).toEqual([Path.join(service, "ocx2-run-x")])
    expect(c.removeNow()).toBe(true)
  })

  it("systemd 252 (no DelegateSubgroup=): a service's own group holding its processes is refused, naming the scope and DelegateSubgroup; nothing is enabled", () => {
    const f = fake()
    const service = f.group(unit, [90, 91])
    const host = v2Only(f, unit, 90)
    // pids first, as the node measures: the kernel would take it with the processes there, and the
    // unit's next start would still be placed in the group; memory would then make it fail (219/CGROUP)
    const problem = probeController("pids", host)
    expect(problem).toMatch(/systemd service's/)
    expect(problem).toMatch(/systemd-run --scope -p Delegate=yes/)
    expect(problem).toMatch(/DelegateSubgroup=ocx2-node/)
    expect(probeController("memory", host)).toMatch(/systemd service's/)
    expect(lookV2(f.host(unit, 90), "memory")).toMatch(/systemd service's/)
    expect(f.procs(service)).toEqual([90, 91])
    expect(read(service, "cgroup.subtree_control")).toBe("")
    expect(f.groups(service)).toEqual([service])
  })

  it("the node in a delegated scope of its own (systemd-run --scope -p Delegate=yes, the units on systemd 252): pids then memory, its processes moved first", () => {
    const f = fake()
    const scopePath = "/system.slice/run-r1234.scope"
    const scope = f.group(scopePath, [90, 91])
    const host = v2Only(f, scopePath, 90)
    // pids first, as the node measures: enabled with the processes still there, the scope would be
    // a thread root that refuses memory (EOPNOTSUPP, Linux 6.1); they are moved out first
    expect(probeController("pids", host)).toBeUndefined()
    expect(probeController("memory", host)).toBeUndefined()
    const leaf = Path.join(scope, nodeLeaf)
    expect(f.procs(scope)).toEqual([])
    expect(f.procs(leaf)).toEqual([90, 91])
    expect(words(read(scope, "cgroup.subtree_control")).sort()).toEqual(["memory", "pids"])
    const c = LaunchCgroups.make("ocx2-run-y", { pids: true, pidsMax: 3, memoryBytes: 2 << 20 }, host)
    expect(c.dirs()).toEqual([Path.join(scope, "ocx2-run-y")])
    expect(c.removeNow()).toBe(true)
  })

  it("a group its parent does not give memory: memory refused with why, pids given", () => {
    const f = fake()
    const slice = f.group("/app.slice")
    f.enabled(slice, "pids")
    const scope = f.group("/app.slice/term.scope", [55])
    const host = v2Only(f, "/app.slice/term.scope", 55)
    expect(describeController("memory", host)).toMatch(/^not available: .*term\.scope is not given memory: its cgroup\.controllers lists pids/)
    expect(probeController("memory", host)).toMatch(/is not given memory/)
    expect(f.procs(scope)).toEqual([55])
    expect(probeController("pids", host)).toBeUndefined()
    expect(read(scope, "cgroup.subtree_control").trim()).toBe("pids")
    expect(f.procs(Path.join(scope, nodeLeaf))).toEqual([55])
    expect(lookV2(f.host("/app.slice/term.scope", 55), "pids")).toBeUndefined()
  })

  it("the root group takes controllers with processes in it: nothing is moved", () => {
    const f = fake()
    f.enabled(f.root, "")
    expect(prepareV2(f.host("/", 1), ["memory", "pids"])).toBeUndefined()
    expect(f.procs(f.root)).toEqual([1])
    expect(Fs.existsSync(Path.join(f.root, nodeLeaf))).toBe(false)
  })

  it("recovery ends a dead watcher's leftover group through cgroup.kill and removes it", () => {
    const f = fake()
    const scope = f.group("/x.scope", [20])
    const host = v2Only(f, "/x.scope", 20)
    const c = LaunchCgroups.make(leftoverName("r1"), { pids: true, pidsMax: 4, memoryBytes: undefined }, host)
    f.fork(20, 21)
    f.io.write(c.procsFiles()[0]!, "21")
    f.fork(21, 22)
    expect(endLeftovers("r1", host)).toBe(2)
    expect(f.killed.sort()).toEqual([21, 22])
    expect(Fs.existsSync(Path.join(scope, leftoverName("r1")))).toBe(false)
    expect(endLeftovers("r1", host)).toBe(0)
  })
})

describe("this host (cgroup v1)", () => {
  it("gives memory and processes from its v1 hierarchies, and status says so", () => {
    const host = realHost()
    expect(versionOf("memory", host)).toBe(1)
    expect(versionOf("pids", host)).toBe(1)
    expect(probeController("memory")).toBeUndefined()
    expect(probeController("pids")).toBeUndefined()
    expect(describeController("memory")).toBe("cgroup v1 memory")
    const looked = hostLimits(undefined)
    expect(looked.limits).toMatchObject({ processes: "cgroup v1 pids", memory: "cgroup v1 memory", cpu: expect.stringMatching(/^prlimit RLIMIT_CPU/) })
    expect(looked.limitsFrom).toMatch(/this call's look/)
  })

  it("status takes the node's measure (ROOT/node/capabilities.json) where there is one", () => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-limits-status-"))
    try {
      Fs.mkdirSync(Path.join(root, "node"), { recursive: true })
      Fs.writeFileSync(Path.join(root, "node", "capabilities.json"), JSON.stringify({
        sandbox: true, wall: true, cpu: false, file_size: false, processes: true, memory: false,
        notes: ["cpu, file_size: /usr/bin/prlimit is missing", "memory: /x is not given memory: its cgroup.controllers lists pids"]
      }))
      const { limits, limitsFrom } = hostLimits(root)
      expect(limits).toEqual({
        wall: expect.stringMatching(/watcher/),
        cpu: "not available: /usr/bin/prlimit is missing",
        processes: "cgroup v1 pids",
        file_size: "not available: /usr/bin/prlimit is missing",
        memory: "not available: /x is not given memory: its cgroup.controllers lists pids"
      })
      expect(limitsFrom).toMatch(/the node's measure in .*capabilities\.json/)
    } finally {
      Fs.rmSync(root, { recursive: true, force: true })
    }
  })
})


