/** The form of a LaunchSpec, checked before anything is made; each error names its key. */
import * as Path from "node:path"
import { InvalidLaunchSpec, type LaunchSpec } from "../../services/SandboxLauncher.js"

/** the capabilities Linux 6 knows (bwrap refuses any other name) */
export const linuxCapabilityNames: ReadonlySet<string> = new Set([
  "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
  "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN",
  "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
  "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
  "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP",
  "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
  "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"
])

const bad = (key: string, reason: string) => new InvalidLaunchSpec({ key, reason })
const hasNul = (s: string) => s.includes("\0")
const isCount = (n: unknown) => typeof n === "number" && Number.isSafeInteger(n) && n >= 0
const isPositive = (n: unknown) => typeof n === "number" && Number.isSafeInteger(n) && n > 0

/**
 * The most bytes Linux passes in one argument or variable (MAX_ARG_STRLEN, 32 pages, less its NUL):
 * past it exec fails with E2BIG every time, so such a run is refused naming the key, never launched.
 */
export const maxArgumentBytes = 32 * 4096 - 1

const tooLong = (size: number) =>
  `is ${size} bytes, more than the ${maxArgumentBytes} bytes Linux passes to a program in one argument (MAX_ARG_STRLEN)`

export const checkSpecForm = (spec: LaunchSpec): InvalidLaunchSpec | undefined => {
  if (spec.command.length === 0) return bad("command", "is empty")
  if (spec.command.some(hasNul)) return bad("command", "holds a NUL character")
  if (spec.command[0] === "") return bad("command", "names an empty program")
  for (const [i, arg] of spec.command.entries()) {
    const size = Buffer.byteLength(arg)
    if (size > maxArgumentBytes) return bad(`process.command[${i}]`, tooLong(size))
  }
  for (const [k, v] of Object.entries(spec.env)) {
    if (k === "" || k.includes("=") || hasNul(k) || hasNul(v)) return bad("env", `${JSON.stringify(k)} is not a usable variable`)
    // each variable reaches the sandbox as an argument of bwrap's (--setenv NAME VALUE)
    const size = Buffer.byteLength(v)
    if (size > maxArgumentBytes) return bad(`process.env.${k}`, tooLong(size))
  }
  if (!Path.isAbsolute(spec.cwd) || hasNul(spec.cwd)) return bad("cwd", `${JSON.stringify(spec.cwd)} is not an absolute path`)
  for (const line of spec.stdin.lines) if (line.includes("\n")) return bad("stdin", "a line holds a newline")
  if (!isCount(spec.keep.stdout) || !isCount(spec.keep.stderr)) return bad("keep", "sizes are whole numbers of bytes")
  if (spec.logDir !== undefined && !Path.isAbsolute(spec.logDir)) return bad("logDir", "is not an absolute path")
  if (spec.streamFile !== undefined && !Path.isAbsolute(spec.streamFile)) return bad("streamFile", "is not an absolute path")
  const l = spec.limits
  // wall may hold a fraction: a session's later processes get what is left of the run's
  if (l.wallSeconds !== undefined && !(Number.isFinite(l.wallSeconds) && l.wallSeconds > 0)) {
    return bad("limits.wall", `${String(l.wallSeconds)} is not a positive number of seconds`)
  }
  for (const [key, v] of [
    ["cpu", l.cpuSeconds], ["processes", l.processes], ["file_size", l.fileSizeBytes], ["memory", l.memoryBytes]
  ] as const) {
    if (v !== undefined && !isPositive(v)) return bad(`limits.${key}`, `${String(v)} is not a positive whole number`)
  }
  const sb = spec.sandbox
  if (sb === undefined) return undefined
  if (!isCount(sb.uid) || !isCount(sb.gid)) return bad("sandbox.uid/gid", "are whole numbers")
  for (const cap of sb.linuxCapabilities) {
    if (!linuxCapabilityNames.has(cap)) return bad("sandbox.linux_capabilities", `${JSON.stringify(cap)} is not a Linux capability`)
  }
  for (const [key, p] of [["proc", sb.proc], ["dev", sb.dev], ["tmp", sb.tmp]] as const) {
    if (!Path.isAbsolute(p) || hasNul(p)) return bad(`sandbox.${key}`, `${JSON.stringify(p)} is not an absolute path`)
  }
  for (const f of sb.createdFiles) {
    if (!Path.isAbsolute(f.at) || hasNul(f.at)) return bad("sandbox.created_files", `${JSON.stringify(f.at)} is not an absolute path`)
  }
  for (const [key, list] of [["read_only", sb.readOnly], ["read_write", sb.readWrite], ["homes", sb.homes]] as const) {
    for (const p of list) if (hasNul(p)) return bad(`sandbox.${key}`, "a path holds a NUL character")
  }
  return undefined
}
