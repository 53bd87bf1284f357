/*
 * ocx2-container-mounts DISK-FILE DISK-DIR LOWER MERGED: a container's disk and root file system in
 * one process (docs/containers.md section 12): DISK-FILE (an ext4 file system, made ahead or just
 * made) attached to a free loop device that frees itself once unmounted (autoclear, as `mount -o
 * loop` sets it), mounted nodev,nosuid at DISK-DIR (made here); then DISK-DIR/upper and
 * DISK-DIR/work made, and the overlay of LOWER (the image's read-only rootfs) under them mounted
 * at MERGED (made here). It is what `mount -o loop` and `mount -t overlay` did as two processes of
 * a dynamically linked mount(8) each, on the path from the request to the id: a static C program
 * starts in about a millisecond.
 *
 * Exit status 0, or 1 with what failed on stderr; what it mounted before a failure stays mounted
 * under the container's directory, which the deployer's stop unmounts as always.
 *
 * Built by bin/fusemountfd.mjs with `gcc -static` into dist/ocx2-container-mounts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(const char *what, const char *path) {
  fprintf(stderr, "ocx2-container-mounts: %s %s: %s\n", what, path, strerror(errno));
  return 1;
}

/* a free loop device configured on FILE's descriptor: its open descriptor (its path in DEVICE), or -1 */
static int attach(int file, const char *name, char device[64]) {
  int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (control < 0) return fail("cannot open", "/dev/loop-control"), -1;
  for (int attempt = 0; attempt < 100; attempt++) {
    int n = ioctl(control, LOOP_CTL_GET_FREE);
    if (n < 0) return fail("no free loop device for", name), -1;
    snprintf(device, 64, "/dev/loop%d", n);
    int loop = open(device, O_RDWR | O_CLOEXEC);
    if (loop < 0) {
      /* its node may not be made yet by the time we look */
      if (errno == ENOENT) {
        usleep(1000);
        continue;
      }
      return fail("cannot open", device), -1;
    }
    struct loop_config config;
    memset(&config, 0, sizeof config);
    config.fd = (unsigned)file;
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    strncpy((char *)config.info.lo_file_name, name, LO_NAME_SIZE - 1);
    if (ioctl(loop, LOOP_CONFIGURE, &config) == 0) {
      close(control);
      /* the descriptor stays open until the mount holds the device: autoclear frees it at the unmount */
      return loop;
    }
    int e = errno;
    close(loop);
    /* taken by another between GET_FREE and CONFIGURE: another */
    if (e == EBUSY) continue;
    errno = e;
    return fail("cannot attach a loop device to", name), -1;
  }
  errno = EBUSY;
  return fail("no free loop device stayed free for", name), -1;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: ocx2-container-mounts DISK-FILE DISK-DIR LOWER MERGED\n");
    return 2;
  }
  const char *file = argv[1], *disk = argv[2], *lower = argv[3], *merged = argv[4];
  int fd = open(file, O_RDWR | O_CLOEXEC);
  if (fd < 0) return fail("cannot open", file);
  if (mkdir(disk, 0755) < 0) return fail("cannot make", disk);
  char device[64];
  int loop = attach(fd, file, device);
  if (loop < 0) return 1;
  if (mount(device, disk, "ext4", MS_NODEV | MS_NOSUID, "") < 0) return fail("cannot mount the disk at", disk);
  close(loop);
  close(fd);
  char upper[4096], work[4096], options[3 * 4096 + 64];
  snprintf(upper, sizeof upper, "%s/upper", disk);
  snprintf(work, sizeof work, "%s/work", disk);
  if (mkdir(upper, 0755) < 0) return fail("cannot make", upper);
  if (mkdir(work, 0755) < 0) return fail("cannot make", work);
  if (mkdir(merged, 0755) < 0) return fail("cannot make", merged);
  snprintf(options, sizeof options, "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
  if (mount("overlay", merged, "overlay", 0, options) < 0) return fail("cannot mount the overlay at", merged);
  return 0;
}
