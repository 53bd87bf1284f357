// Seed 000 2.19's two runs, as the seed writes them, with only the words in capitals made
// concrete by the caller. Nothing is added to make them work on a host: on a merged-/usr host
// (Debian 12) the sandbox gets the host's links into /usr by itself (docs/protocol.md 2.8). The
// demo posts the first; the tests post both through the forum's web form.

/** The build: builds trunk's image in a sandbox, sets a ci verdict, publishes the image. */
export const seedBuildRun = (concrete: { readonly serverCode: string; readonly buildUser: string }) => ({
  clone: concrete.serverCode,
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
    user: concrete.buildUser,
    command: ["make", "-C", "$$tree$$", "image"],
    env: { PATH: "/usr/bin:/bin", HOME: "$$workspace$$" },
    verdict: true,
    unversioned_files: [{ at: "$$workspace$$/tree/out/board.img", as: "builds/board.img" }]
  }
})

/** The session of an agent that answers each post of its thread, a process per post. */
export const seedSessionRun = (concrete: {
  readonly serverCode: string
  readonly agentSignIn: string
  readonly agentUser: string
  readonly agentCommand: ReadonlyArray<string>
  readonly personUser: string
}) => ({
  clone: concrete.serverCode,
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
    homes: [concrete.agentSignIn], created_files: []
  },
  limits: { wall: "8h" },
  process: {
    user: concrete.agentUser,
    command: [...concrete.agentCommand],
    cwd: "$$tree$$",
    session: true, hears: [concrete.personUser], deliveries: "start"
  }
})
