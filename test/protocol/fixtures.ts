// Shared inputs of the protocol tests: the two runs of 2.19 made concrete, a host, a
// fake resolver following a few links.
import { seedBuildRun, seedSessionRun } from "../../src/demo/SeedExamples.js"
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
export const buildRun = () => seedBuildRun({ serverCode: SERVER_CODE, buildUser: "builder" })
export const buildBlock = (): Record<string, unknown> => ({ ocx: 2, to: "lab-2", run: buildRun() })

/** 2.19, the session */
export const sessionRun = () =>
  seedSessionRun({
    serverCode: SERVER_CODE,
    agentSignIn: "/home/agent/.claude",
    agentUser: "agent",
    agentCommand: ["/usr/bin/agent", "--answer"],
    personUser: "carol"
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
