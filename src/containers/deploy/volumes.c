/*
 * ocx2-container-volumes PID STAGING INSIDE [ro|rw HOST-PATH CONTAINER-PATH]...: binds a taken
 * spare's volumes into its mount namespace (docs/containers.md section 12, "Spares"). PID is the
 * container's (its namespaces are /proc/PID/ns/), STAGING the host's side of its staging mount (a
 * tmpfs under the container's directory, made shared as the spare stood up) and INSIDE where the
 * sandbox has that mount (a slave of it: what is mounted at STAGING later appears at INSIDE).
 *
 * For each volume, on the host: the HOST-PATH (resolved by the server already: a path with any
 * symbolic link in it is refused) is cloned as a detached bind mount, made nosuid, nodev and,
 * for "ro", read-only while still detached, and moved onto STAGING/N. Its copy in the sandbox is
 * made by propagation into a namespace of a less privileged user namespace, so the kernel locks
 * those flags there: not even the container's root can make it writable. Then, in the container's
 * own user and mount namespaces (with no more power than its root has), CONTAINER-PATH is made
 * when missing (its parents too, as bubblewrap makes a mount point) and INSIDE/N bound on it.
 * Last, STAGING/N is unmounted again (and its copy with it), so that the volume is seen only at
 * its path. A static C program: Node has no mount(2), and this is on the path to the id.
 *
 * It waits for bubblewrap to have made the sandbox's mounts (a spare may be taken before then).
 *
 * Built by bin/fusemountfd.mjs with `gcc -static` into dist/ocx2-container-volumes. Exit 0 once
 * every volume is bound; else 1 and what failed on standard error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_VOLUMES 256

static int fail(const char *what, const char *path) {
  fprintf(stderr, "%s %s: %s\n", what, path, strerror(errno));
  return 1;
}

/* the parents of PATH, made as directories where missing (in the container's tree) */
static int makeParents(const char *path) {
  char buffer[4096];
  if (strlen(path) >= sizeof buffer) return errno = ENAMETOOLONG, -1;
  strcpy(buffer, path);
  for (char *p = buffer + 1; *p != '\0'; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buffer, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return 0;
}

static int inside(int userns, int mntns, int root, const char *staging, int count, char **targets, const int *directory) {
  if (setns(userns, CLONE_NEWUSER) != 0) return fail("setns", "user");
  if (setns(mntns, CLONE_NEWNS) != 0) return fail("setns", "mnt");
  if (fchdir(root) != 0 || chroot(".") != 0 || chdir("/") != 0) return fail("chroot", "the container's root");
  for (int i = 0; i < count; i++) {
    char from[4096];
    snprintf(from, sizeof from, "%s/%d", staging, i);
    if (makeParents(targets[i]) != 0) return fail("mkdir", targets[i]);
    int made = directory[i] ? mkdir(targets[i], 0755) : mknod(targets[i], S_IFREG | 0644, 0);
    if (made != 0 && errno != EEXIST) return fail("mkdir", targets[i]);
    if (mount(from, targets[i], NULL, MS_BIND, NULL) != 0) return fail("mount", targets[i]);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4 || (argc - 4) % 3 != 0 || (argc - 4) / 3 > MAX_VOLUMES) {
    fprintf(stderr, "usage: ocx2-container-volumes PID STAGING INSIDE [ro|rw HOST-PATH CONTAINER-PATH]...\n");
    return 2;
  }
  const char *pid = argv[1], *staging = argv[2], *insideStaging = argv[3];
  int count = (argc - 4) / 3;
  char *targets[MAX_VOLUMES];
  int directory[MAX_VOLUMES];
  char path[4096];
  /*
   * A spare may be taken as soon as its relay runs, while bubblewrap is still making its mounts:
   * its namespaces exist, but its root is not the container's yet. Once the staging mount is seen
   * at INSIDE under the container's root (bound, and the root pivoted to), every mount bubblewrap
   * makes of it is made; until then this waits (a bounded time: 60 s).
   */
  struct stat host, seen;
  if (stat(staging, &host) != 0) return fail("stat", staging);
  snprintf(path, sizeof path, "/proc/%s/root%s", pid, insideStaging);
  for (int waited = 0; stat(path, &seen) != 0 || seen.st_dev != host.st_dev; waited++) {
    char process[64];
    snprintf(process, sizeof process, "/proc/%s", pid);
    if (access(process, F_OK) != 0) return fail("the container's process", process);
    if (waited == 60000) {
      fprintf(stderr, "the container's staging mount did not appear at %s within 60 s\n", insideStaging);
      return 1;
    }
    usleep(1000);
  }
  snprintf(path, sizeof path, "/proc/%s/ns/user", pid);
  int userns = open(path, O_RDONLY | O_CLOEXEC);
  if (userns < 0) return fail("open", path);
  snprintf(path, sizeof path, "/proc/%s/ns/mnt", pid);
  int mntns = open(path, O_RDONLY | O_CLOEXEC);
  if (mntns < 0) return fail("open", path);
  snprintf(path, sizeof path, "/proc/%s/root", pid);
  int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return fail("open", path);

  int status = 0;
  int staged = 0;
  for (int i = 0; i < count && status == 0; i++) {
    const char *mode = argv[4 + 3 * i], *host = argv[5 + 3 * i];
    targets[i] = argv[6 + 3 * i];
    if (targets[i][0] != '/') {
      fprintf(stderr, "the container path %s is not absolute\n", targets[i]);
      status = 1;
      break;
    }
    struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
    int source = (int)syscall(SYS_openat2, AT_FDCWD, host, &how, sizeof how);
    if (source < 0) { status = fail("open", host); break; }
    struct stat st;
    if (fstat(source, &st) != 0) { status = fail("stat", host); break; }
    directory[i] = S_ISDIR(st.st_mode);
    int tree = open_tree(source, "", AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (tree < 0) { status = fail("open_tree", host); break; }
    struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (strcmp(mode, "ro") == 0 ? MOUNT_ATTR_RDONLY : 0) };
    if (strcmp(mode, "ro") != 0 && strcmp(mode, "rw") != 0) { fprintf(stderr, "the mode %s is neither ro nor rw\n", mode); status = 1; break; }
    if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) { status = fail("mount_setattr", host); break; }
    snprintf(path, sizeof path, "%s/%d", staging, i);
    int made = directory[i] ? mkdir(path, 0700) : mknod(path, S_IFREG | 0600, 0);
    if (made != 0 && errno != EEXIST) { status = fail("mkdir", path); break; }
    if (move_mount(tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) != 0) { status = fail("move_mount", path); break; }
    staged = i + 1;
    close(tree);
    close(source);
  }
  if (status == 0) {
    pid_t child = fork();
    if (child < 0) status = fail("fork", "");
    else if (child == 0) _exit(inside(userns, mntns, root, insideStaging, count, targets, directory));
    else {
      int wstatus;
      while (waitpid(child, &wstatus, 0) < 0 && errno == EINTR) {}
      status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 1;
    }
  }
  /* the staged copies are let go of: each volume stays bound at its own path only */
  for (int i = 0; i < staged; i++) {
    snprintf(path, sizeof path, "%s/%d", staging, i);
    if (umount2(path, 0) != 0) umount2(path, MNT_DETACH);
  }
  return status;
}
