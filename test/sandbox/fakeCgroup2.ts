/**
 * A directory shaped as the kernel shapes cgroup2, with the kernel's answers to writes: what the
 * v2 decisions (src/sandbox/CgroupsV2.ts) are tested against on a host that mounts v1 alone.
 * Files have the kernel's names and contents; writes follow cgroup-v2.rst: a controller is
 * enabled in cgroup.subtree_control only when the parent gives it and (but at the root) the group
 * holds no process, except a threaded controller (pids), which makes a group holding processes a
 * thread root that then refuses a domain controller (memory) with EOPNOTSUPP, as Linux 6.1 does
 * (seen on Debian 12 by bin/hosts); a process joins no group with domain controllers enabled for its children; a
 * controller's files exist only where the parent enabled it; rmdir refuses a group with a process
 * or a child; cgroup.kill ends every process of a group and its descendants.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { CgroupIo, V2Host } from "../../src/sandbox/CgroupsV2.js"

/** the controllers Linux lets a group with processes give its children (cgroup_dfl_threaded_ss_mask) */
const threaded = ["cpu", "cpuset", "perf_event", "pids"]

const errno = (code: string, what: string) => Object.assign(new Error(`${code}: ${what}`), { code })
const words = (text: string) => text.split(/\s+/).filter((w) => w !== "")

export const memoryEventsZero = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"

export class FakeCgroup2 {
  readonly root: string
  /** every process the fake kernel killed */
  readonly killed: Array<number> = []

  constructor(controllers = "cpuset cpu io memory pids") {
    this.root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-cgroup2-"))
    // the root: every controller given, as systemd enables them for its slices
    this.file(this.root, "cgroup.controllers", `${controllers}\n`)
    this.file(this.root, "cgroup.subtree_control", `${controllers}\n`)
    this.file(this.root, "cgroup.procs", "1\n")
    this.file(this.root, "cgroup.max.depth", "max\n")
  }

  remove() {
    Fs.rmSync(this.root, { recursive: true, force: true })
  }

  private file(dir: string, name: string, text: string) {
    Fs.writeFileSync(Path.join(dir, name), text)
  }

  private read(dir: string, name: string): string {
    return Fs.readFileSync(Path.join(dir, name), "utf8")
  }

  /** a group as the kernel makes it on mkdir: its files, by what the parent enables */
  private populate(dir: string) {
    const given = words(this.read(Path.dirname(dir), "cgroup.subtree_control"))
    this.file(dir, "cgroup.controllers", given.length === 0 ? "" : `${given.join(" ")}\n`)
    this.file(dir, "cgroup.subtree_control", "")
    this.file(dir, "cgroup.procs", "")
    this.file(dir, "cgroup.events", "populated 0\nfrozen 0\n")
    this.file(dir, "cgroup.type", "domain\n")
    this.file(dir, "cgroup.kill", "")
    this.file(dir, "cgroup.freeze", "0\n")
    if (given.includes("memory")) {
      this.file(dir, "memory.max", "max\n")
      this.file(dir, "memory.high", "max\n")
      this.file(dir, "memory.current", "0\n")
      this.file(dir, "memory.swap.max", "max\n")
      this.file(dir, "memory.events", memoryEventsZero)
      this.file(dir, "memory.oom.group", "0\n")
    }
    if (given.includes("pids")) {
      this.file(dir, "pids.max", "max\n")
      this.file(dir, "pids.current", "0\n")
      this.file(dir, "pids.events", "max 0\n")
    }
  }

  /** makes a group (and its parents) as systemd would, holding `pids`: a slice made on the way gives its children all it has */
  group(path: string, pids: ReadonlyArray<number> = []): string {
    let dir = this.root
    const parts = path.split("/").filter((p) => p !== "")
    parts.forEach((part, i) => {
      dir = Path.join(dir, part)
      if (!Fs.existsSync(dir)) {
        Fs.mkdirSync(dir)
        this.populate(dir)
        if (i < parts.length - 1) this.file(dir, "cgroup.subtree_control", this.read(dir, "cgroup.controllers"))
      }
    })
    if (pids.length > 0) this.file(dir, "cgroup.procs", `${pids.join("\n")}\n`)
    return dir
  }

  /** sets a group's cgroup.subtree_control as its manager left it */
  enabled(dir: string, controllers: string) {
    this.file(dir, "cgroup.subtree_control", controllers === "" ? "" : `${controllers}\n`)
  }

  procs(dir: string): Array<number> {
    return words(this.read(dir, "cgroup.procs")).map(Number)
  }

  /** every group of the tree, the root first */
  groups(dir = this.root): Array<string> {
    return [dir, ...Fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).flatMap((e) => this.groups(Path.join(dir, e.name)))]
  }

  private holding(pid: number): string | undefined {
    return this.groups().find((g) => this.procs(g).includes(pid))
  }

  private setProcs(dir: string, pids: ReadonlyArray<number>) {
    this.file(dir, "cgroup.procs", pids.length === 0 ? "" : `${pids.join("\n")}\n`)
  }

  /** a process forks: the child starts in its parent's group */
  fork(parent: number, child: number) {
    const dir = this.holding(parent)
    if (dir === undefined) throw new Error(`no process ${parent}`)
    this.setProcs(dir, [...this.procs(dir), child])
  }

  /** what the kernel does to a write */
  private write(file: string, value: string) {
    const dir = Path.dirname(file)
    const name = Path.basename(file)
    if (!Fs.existsSync(file)) throw errno("ENOENT", `${file} (no such file: its controller is not enabled here)`)
    const isRoot = dir === this.root
    if (name === "cgroup.subtree_control") {
      let now = words(this.read(dir, name))
      const given = words(this.read(dir, "cgroup.controllers"))
      for (const w of words(value)) {
        const c = w.slice(1)
        if (w.startsWith("+")) {
          if (!given.includes(c)) throw errno("ENOENT", `${c} is not in ${dir}/cgroup.controllers`)
          if (!isRoot && this.procs(dir).length > 0 && !threaded.includes(c)) {
            // a group holding processes that gives a threaded controller is a thread root: no domain controller there
            if (now.some((x) => threaded.includes(x))) throw errno("ENOTSUP", `${dir} is a thread root (processes and ${now.join(" ")}): no domain controller`)
            throw errno("EBUSY", `${dir} holds processes (no internal processes)`)
          }
          if (!now.includes(c)) now = [...now, c]
        } else if (w.startsWith("-")) {
          now = now.filter((x) => x !== c)
        } else throw errno("EINVAL", w)
      }
      this.file(dir, name, now.length === 0 ? "" : `${now.join(" ")}\n`)
      // the children's controller files follow
      for (const child of Fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory())) {
        const childDir = Path.join(dir, child.name)
        const keep = new Map<string, string>()
        for (const f of Fs.readdirSync(childDir)) if (Fs.statSync(Path.join(childDir, f)).isFile()) keep.set(f, this.read(childDir, f))
        this.populate(childDir)
        for (const [f, text] of keep) if (Fs.existsSync(Path.join(childDir, f)) && f !== "cgroup.controllers") this.file(childDir, f, text)
      }
      return
    }
    if (name === "cgroup.procs") {
      const pid = Number(value.trim())
      const from = this.holding(pid)
      if (from === undefined) throw errno("ESRCH", `no process ${pid}`)
      if (!isRoot && words(this.read(dir, "cgroup.subtree_control")).some((c) => !threaded.includes(c))) {
        throw errno("EBUSY", `${dir} enables controllers for its children (no internal processes)`)
      }
      this.setProcs(from, this.procs(from).filter((p) => p !== pid))
      this.setProcs(dir, [...this.procs(dir), pid])
      return
    }
    if (name === "cgroup.kill") {
      if (value.trim() !== "1") throw errno("EINVAL", value)
      for (const g of this.groups(dir)) {
        this.killed.push(...this.procs(g))
        this.setProcs(g, [])
      }
      return
    }
    Fs.writeFileSync(file, value)
  }

  /** the io the code under test is given */
  readonly io: CgroupIo = {
    read: (file) => Fs.readFileSync(file, "utf8"),
    write: (file, value) => this.write(file, value),
    mkdir: (dir) => {
      Fs.mkdirSync(dir)
      this.populate(dir)
    },
    rmdir: (dir) => {
      if (!Fs.existsSync(dir)) throw errno("ENOENT", dir)
      if (this.procs(dir).length > 0) throw errno("EBUSY", `${dir} holds processes`)
      if (Fs.readdirSync(dir, { withFileTypes: true }).some((e) => e.isDirectory())) throw errno("EBUSY", `${dir} has children`)
      Fs.rmSync(dir, { recursive: true })
    },
    exists: (path) => Fs.existsSync(path),
    kill: (pid) => {
      const dir = this.holding(pid)
      if (dir === undefined) throw errno("ESRCH", String(pid))
      this.killed.push(pid)
      this.setProcs(dir, this.procs(dir).filter((p) => p !== pid))
    }
  }

  /** the host as a process with /proc/self/cgroup's `0::PATH` line sees it */
  host(ownPath: string, pid: number): V2Host {
    return { root: this.root, mountRoot: "/", selfCgroup: `0::${ownPath}\n`, pid, io: this.io }
  }
}
