/** The host's programs a launch runs, where Debian installs them, and the host name every sandbox sees. */
export const hostTools = {
  bash: "/bin/bash",
  bwrap: "/usr/bin/bwrap",
  setpriv: "/usr/bin/setpriv",
  prlimit: "/usr/bin/prlimit",
  hostname: "sandbox"
} as const
