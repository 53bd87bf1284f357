/**
 * A process that holds a file's flock, as a watcher holds its run's lock or its process user's,
 * for tests of what waits behind one. `holdLock` resolves once the kernel shows the lock held (the
 * shell makes the file as it starts, so until then there is none to look for); the function it
 * gives kills the holder, as a SIGKILLed watcher dies, without waking anyone, and resolves once it
 * is gone.
 */
import * as ChildProcess from "node:child_process"
import { flockHeld } from "../../src/care/FlockHeld.js"
import { waitFor } from "./world.js"

export const holdLock = async (file: string): Promise<() => Promise<void>> => {
  const holder = ChildProcess.spawn("sh", ["-c", `exec 3>>'${file}'; flock --exclusive 3; exec sleep 600`], { stdio: "ignore" })
  const gone = new Promise<void>((resolve) => holder.once("exit", () => resolve()))
  const letGo = () => {
    holder.kill("SIGKILL")
    return gone
  }
  try {
    await waitFor(() => (flockHeld(file) === "held" ? true : undefined), 10_000, 20)
  } catch (e) {
    await letGo()
    throw e
  }
  return letGo
}
