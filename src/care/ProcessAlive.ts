// Whether a process lives, by its pid: signal 0 is delivered to nobody but says whether the pid
// exists. EPERM means it does, as another user's process.

export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}
