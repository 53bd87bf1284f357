#!/bin/bash
# mmdebstrap's customize hook for the host check's guest (image.sh): $1 is the root being made.
set -euo pipefail
r=$1
echo ocx2-guest > "$r/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 ocx2-guest\n' > "$r/etc/hosts"
printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\nhost /mnt/host 9p trans=virtio,version=9p2000.L,msize=1048576,nofail 0 0\n' > "$r/etc/fstab"
mkdir -p "$r/mnt/host"
# an initramfs with only what mounts the root: the virtio disk and ext4
printf 'virtio_pci\nvirtio_blk\next4\n9pnet_virtio\n9p\n' > "$r/etc/initramfs-tools/modules"
chroot "$r" update-initramfs -u -k all
# root without a password on the console (only the serial console reaches this guest)
chroot "$r" passwd -d root
# what a minimal server does not need at boot, and timers that would run in the middle of a check
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer \
  dpkg-db-backup.timer systemd-tmpfiles-clean.timer; do
  ln -sf /dev/null "$r/etc/systemd/system/$unit"
done
# the check: at every boot, once the host's share is mounted, run what the host put there
cat > "$r/etc/systemd/system/ocx2-hostcheck.service" <<'UNIT'
[Unit]
Description=OCX host check: runs /mnt/host/guest.sh from the host's share
After=multi-user.target mnt-host.mount
RequiresMountsFor=/mnt/host
ConditionPathExists=/mnt/host/guest.sh

[Service]
Type=simple
ExecStart=/bin/bash /mnt/host/guest.sh
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0

[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/ocx2-hostcheck.service "$r/etc/systemd/system/multi-user.target.wants/ocx2-hostcheck.service"
