/*
 * fusemountfd: the two steps of a FUSE mount made in JavaScript (src/containers/fuse/Mount.ts)
 * that JavaScript cannot take itself. Built static (gcc -static) so that it runs in any amd64
 * image, with a libc or none, through no loader.
 *
 *   fusemountfd mount TARGET ROOTMODE
 *       The open /dev/fuse is fd 3. mount(2) of type fuse.ocx2 at TARGET with
 *       fd=3,rootmode=ROOTMODE (octal),user_id=0,group_id=0,default_permissions; then, until the
 *       mount ends (ENODEV), every request read from fd 3 is copied whole to stdout. The caller
 *       keeps its own copy of the descriptor and writes the replies to it; each request starts
 *       with its length, so stdout needs no framing of its own. Dies with its parent.
 *   fusemountfd unmount TARGET
 *       umount2(2) with MNT_DETACH: gone from the tree at once; the connection ends (and the
 *       copying above with it) once nothing holds a file open on the mount.
 *
 * Why the requests pass through here: a read of /dev/fuse blocks until the kernel has a
 * request. In Node that read would hold a thread (a worker, or one of the threadpool's four) in
 * read(2), and Node joins its threads when the process exits: a process that exits while a
 * mount is live would hang there. A pipe from this process is read by the event loop like any
 * socket, and nothing waits on it at exit.
 *
 * Exit status 0, or 1 with the reason on stderr.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

/* the largest request: a 1 MiB WRITE and its headers (Mount.ts asks for max_write 1 MiB) */
#define REQUEST_MAX (1024 * 1024 + 4096)

static int relay(void) {
  static char buffer[REQUEST_MAX];
  for (;;) {
    ssize_t n = read(3, buffer, sizeof buffer);
    if (n < 0) {
      /* ENOENT: a request the kernel took back (interrupted) before it was read */
      if (errno == EINTR || errno == EAGAIN || errno == ENOENT) continue;
      if (errno == ENODEV) return 0; /* unmounted */
      fprintf(stderr, "fusemountfd: reading /dev/fuse: %s\n", strerror(errno));
      return 1;
    }
    if (n == 0) return 0;
    for (ssize_t put = 0; put < n;) {
      ssize_t w = write(1, buffer + put, (size_t)(n - put));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return 1; /* the caller is gone */
      put += w;
    }
  }
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "mount") == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char options[128];
    snprintf(options, sizeof options, "fd=3,rootmode=%s,user_id=0,group_id=0,default_permissions", argv[3]);
    if (mount("ocx2", argv[2], "fuse.ocx2", MS_NOSUID | MS_NODEV, options) != 0) {
      fprintf(stderr, "fusemountfd: mount %s: %s\n", argv[2], strerror(errno));
      return 1;
    }
    return relay();
  }
  if (argc == 3 && strcmp(argv[1], "unmount") == 0) {
    if (umount2(argv[2], MNT_DETACH) == 0) return 0;
    fprintf(stderr, "fusemountfd: unmount %s: %s\n", argv[2], strerror(errno));
    return 1;
  }
  fprintf(stderr, "usage: fusemountfd mount TARGET ROOTMODE (the open /dev/fuse as fd 3) | fusemountfd unmount TARGET\n");
  return 2;
}
