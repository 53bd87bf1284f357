// Shared inputs of the protocol tests: the two runs of 2.19 made concrete, a host, a
// fake resolver following a few links.
import { writeMessage } from "../../src/protocol/Envelope.js"
import { providesAll, type CheckInput, type HostSettings } from "../../src/protocol/Refusals.js"

export const RUN_HASH = "1f".repeat(20)
export const SERVER_CODE = "0123456789abcdef0123456789abcdef01234567"
export const ROOT = "/srv/ocx"

/** links on the fake host: each key is a link to its value */
export const links: Readonly<Record<string, string>> = {
  "/lib": "/usr/lib",
  "/srv/ocx/current": "/srv/ocx/releases/v7",
  "/home/agent/link-to-care": "/srv/ocx/care",
  "/srv/ocx/alice/sneaky": "/srv/ocx/settings"
}

/** realpath of the longest linked prefix, then the rest (as the real resolver does, minus the disk) */
export const fakeResolve = (path: string): string => {
  for (let i = 0; i < 8; i++) {
    const prefix = Object.keys(links)
      .filter((link) => path === link || path.startsWith(`${link}/`))
      .sort((a, b) => b.length - a.length)[0]
    if (prefix === undefined) return path
    path = links[prefix]! + path.slice(prefix.length)
  }
  return path
}

export const host: HostSettings = {
  root: ROOT,
  nodeUser: "lab-2",
  repositoryName: "lab",
  releaseDir: `${ROOT}/current`,
  capabilityR: undefined,
  unconfined: false,
  provides: providesAll,
  ownPaths: [`${ROOT}/clones/lab.fossil`, `${ROOT}/care`, `${ROOT}/settings`, `${ROOT}/current`, `${ROOT}/releases`, `${ROOT}/passwords`],
  resolve: fakeResolve
}

export const admin = { login: "alice", capabilities: "aei" }
export const setup = { login: "sam", capabilities: "s" }

/** 2.19, the build */
export const buildRun = () => ({
  clone: SERVER_CODE,
  objective: "build trunk for the lab board and send the image",
  workspace: [
    { step: "directory", at: "$$root$$/$$process_user$$/projects/$$repository_name$$/$$run$$" },
    { step: "files", of: "trunk", into: "$$workspace$$/tree" }
  ],
  sandbox: {
    uid: 1000, gid: 1000, linux_capabilities: [], network: false,
    isolate_terminal: true, ends_with_parent: true,
    proc: "/proc", dev: "/dev", tmp: "/tmp",
    read_only: ["/usr", "/etc/alternatives"], read_write: ["$$workspace$$"],
    homes: [], created_files: []
  },
  limits: { wall: "1h", cpu: 3000, processes: 256, file_size: "2G" },
  process: {
    user: "builder",
    command: ["make", "-C", "$$tree$$", "image"],
    env: { PATH: "/usr/bin:/bin", HOME: "$$workspace$$" },
    verdict: true,
    unversioned_files: [{ at: "$$workspace$$/tree/out/board.img", as: "builds/board.img" }]
  }
})
export const buildBlock = (): Record<string, unknown> => ({ ocx: 2, to: "lab-2", run: buildRun() })

/** 2.19, the session */
export const sessionRun = () => ({
  clone: SERVER_CODE,
  objective: "answer each post in this thread about the parser",
  workspace: [
    { step: "directory", at: "$$root$$/$$process_user$$/projects/$$repository_name$$/$$run$$" },
    { step: "password" },
    { step: "clone", into: "$$workspace$$/clone", password: "$$password$$" },
    { step: "checkout", of: "trunk", into: "$$workspace$$/tree" }
  ],
  sandbox: {
    uid: 1000, gid: 1000, linux_capabilities: [], network: true,
    isolate_terminal: true, ends_with_parent: true,
    proc: "/proc", dev: "/dev", tmp: "/tmp",
    read_only: ["/usr", "/bin", "/lib", "/etc/resolv.conf", "/etc/ssl/certs", "$$release$$"],
    read_write: ["$$workspace$$"],
    homes: ["/home/agent/.claude"], created_files: []
  },
  limits: { wall: "8h" },
  process: {
    user: "agent",
    command: ["/usr/bin/agent", "--answer"],
    cwd: "$$tree$$",
    session: true, hears: ["carol"], deliveries: "start"
  }
})
export const sessionBlock = (): Record<string, unknown> => ({ ocx: 2, to: "lab-2", run: sessionRun() })

export const sessionText = () => `Please answer in this thread.\n\n${writeMessage(sessionBlock())}`

export const checkInput = (block: Record<string, unknown>, overrides: Partial<CheckInput> = {}): CheckInput => ({
  message: { block },
  runHash: RUN_HASH,
  sender: admin,
  processUserCapabilities: "ei",
  cloneUsers: new Set(["lab-2", "hook-user"]),
  host,
  ...overrides
})

/** a deep copy with one change made by `edit` */
export const edited = <T>(value: T, edit: (copy: any) => void): T => {
  const copy = structuredClone(value)
  edit(copy)
  return copy
}
