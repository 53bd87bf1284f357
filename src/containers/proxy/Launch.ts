/**
 * The launch file: how the deployer tells the container proxy what to start beside itself. The
 * proxy reads no environment and takes no argument (an image's program must not be able to steer
 * it), so the deployer binds this one file read-only at `launchPath` inside the container.
 * It is JSON of `Launch`; a file that is not is the proxy's refusal to start.
 */
export interface Launch {
  /** the image's program: its Entrypoint then its Cmd (OCI image config), at least one word */
  readonly command: ReadonlyArray<string>
  /** the image's Env, `NAME=value` each, and nothing else: no variable comes from a request */
  readonly env: ReadonlyArray<string>
  /** the image's WorkingDir, absolute ("/" when the image names none) */
  readonly workingDir: string
  /** the secrets the program takes, the text of a JSON object `{name: mode}`: the Begun's declaration */
  readonly secrets: string
  /** the user and group the program runs as, the image's User resolved (absent: root, 0 and 0) */
  readonly user?: { readonly uid: number; readonly gid: number }
  /**
   * the descriptors the deployer opened in the proxy for the program's stdout and stderr (pipes the
   * server keeps, docs/containers.md section 11); absent: the program shares the proxy's own
   */
  readonly output?: { readonly stdout: number; readonly stderr: number }
}

/** the highest user or group id a container maps (0 to 65535): an image's User beyond it cannot be run */
export const maxMappedId = 65535

/** where the deployer binds the launch file in every container (a read-only file) */
export const launchPath = "/.proxy/launch.json"

/** where the proxy is reached inside the container: the server's one WebSocket */
export const proxyPort = 14979

/** where the proxy serves the program, on the container's own loopback (docs/containers.md, 10) */
export const programPort = 14978

/** the container's memory events, when the deployer binds them (v1 memory.oom_control, v2 memory.events) */
export const memoryEventsPath = "/.proxy/memory-events"

const isStrings = (v: unknown): v is ReadonlyArray<string> => Array.isArray(v) && v.every((s) => typeof s === "string")

/** the launch a file's text holds, or what is wrong with it */
export const decodeLaunch = (text: string): Launch | string => {
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch {
    return "the launch file is not JSON"
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return "the launch file is not a JSON object"
  const o = v as Record<string, unknown>
  if (!isStrings(o.command) || o.command.length === 0) return "the launch's command is not a list of one or more strings"
  if (!isStrings(o.env) || !o.env.every((e) => e.indexOf("=") > 0)) return "the launch's env is not a list of NAME=value"
  if (typeof o.workingDir !== "string" || !o.workingDir.startsWith("/")) return "the launch's workingDir is not an absolute path"
  if (typeof o.secrets !== "string") return "the launch's secrets is not the text of a declaration"
  try {
    const s = JSON.parse(o.secrets) as unknown
    if (typeof s !== "object" || s === null || Array.isArray(s)) return "the launch's secrets is not a JSON object"
  } catch {
    return "the launch's secrets is not JSON"
  }
  const id = (n: unknown) => Number.isInteger(n) && (n as number) >= 0 && (n as number) <= maxMappedId
  const fd = (n: unknown) => Number.isInteger(n) && (n as number) > 2 && (n as number) < 1024
  let output: Launch["output"]
  if (o.output !== undefined) {
    const out = o.output as Record<string, unknown> | null
    if (typeof out !== "object" || out === null || !fd(out.stdout) || !fd(out.stderr)) return "the launch's output is not {stdout, stderr}, each a descriptor 3 to 1023"
    output = { stdout: out.stdout as number, stderr: out.stderr as number }
  }
  const base = { command: o.command, env: o.env, workingDir: o.workingDir, secrets: o.secrets, ...(output !== undefined ? { output } : {}) }
  if (o.user !== undefined) {
    const u = o.user as Record<string, unknown> | null
    if (typeof u !== "object" || u === null || !id(u.uid) || !id(u.gid)) return `the launch's user is not {uid, gid}, each 0 to ${maxMappedId}`
    return { ...base, user: { uid: u.uid as number, gid: u.gid as number } }
  }
  return base
}

export const encodeLaunch = (launch: Launch): string => JSON.stringify(launch)

/** the environment of the program, as the image gives it (a later NAME wins, as in a shell) */
export const envRecord = (env: ReadonlyArray<string>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const e of env) {
    const i = e.indexOf("=")
    out[e.slice(0, i)] = e.slice(i + 1)
  }
  return out
}
