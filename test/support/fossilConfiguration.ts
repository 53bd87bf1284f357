/**
 * vitest's global setup: fossil's global configuration, made once before the workers start. Every
 * fossil command opens the user's configuration (~/.config/fossil.db or ~/.fossil) and creates it
 * where it is missing; on a host where fossil never ran, the first commands of two test files at
 * once both created it, and one failed "table global_config already exists" (seen on a fresh CI
 * machine). `fossil settings` outside a repository reads it, and so makes it.
 */
import * as ChildProcess from "node:child_process"

export default function setup(): void {
  const r = ChildProcess.spawnSync("fossil", ["settings"], { cwd: "/", env: { ...process.env, USER: process.env.USER ?? "root" }, encoding: "utf8" })
  if (r.status !== 0) throw new Error(`fossil settings (which makes fossil's global configuration) failed: ${r.error?.message ?? r.stderr}`)
}
