// What the whole machine has done since it booted, from /proc/stat: bench/suite counts a test
// file's cost as the difference of two readings, since most of that cost is in the programs and
// servers the file starts.
import * as Fs from "node:fs"

/** CPU seconds spent busy, every core: user, nice, system, irq and softirq (not idle, not iowait) */
export const machineBusySeconds = (): number => {
  // the first line: cpu user nice system idle iowait irq softirq ..., in clock ticks (100 a second)
  const f = Fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
  return (f[0]! + f[1]! + f[2]! + f[5]! + f[6]!) / 100
}
