#!/bin/bash
# Builds the Debian 12 (bookworm) guest of the host check (bin/hosts) from Debian's packages:
# mmdebstrap --variant=minbase with the packages listed beside this file, then an ext4 image of it.
# OUT gets vmlinuz, initrd.img and root.raw. Needs root (mmdebstrap's root mode, mkfs.ext4 -d).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
tree=$out.tree
rm -rf "$tree" && mkdir -p "$out"
include=$(grep -v '^#' "$here/packages" | tr '\n' ',' | sed 's/,$//')
mmdebstrap --variant=minbase --include="$include" \
  --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='Acquire::Check-Date "false"' \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --essential-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" && echo MODULES=list > "$1/etc/initramfs-tools/conf.d/ocx2-hosts.conf"' \
  --customize-hook="'$here/customize.sh' \"\$1\"" \
  bookworm "$tree" /etc/apt/sources.list.d/debian.sources
cp "$tree"/boot/vmlinuz-* "$out/vmlinuz"
cp "$tree"/boot/initrd.img-* "$out/initrd.img"
rm -f "$out/root.raw"
mkfs.ext4 -q -F -L root -d "$tree" "$out/root.raw" 3G
rm -rf "$tree"
