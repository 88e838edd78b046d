#!/usr/bin/env bash
# build.sh: build the CPU Ray node image without any container registry.
#
# Recipe (verified in this environment, see shared DESIGN.md section 4):
#   debootstrap a minimal Debian bookworm root filesystem, create a venv at
#   /opt/mvp/venv inside it, pip install requirements.txt (pinned Ray), then
#   `docker import` the tree with PATH set so `python` and `ray` resolve.
#
# The tag is a hash of this script and requirements.txt, so the image is
# rebuilt only when the recipe changes. Output (stdout, last line):
#   MVP_IMAGE=<repo>:<tag> STATUS=<exists|built>
# Environment:
#   MVP_IMAGE_REPO   image repository name (default mvp-ray-node)
#   MVP_BUILD_DIR    scratch directory for the root filesystem (default /var/tmp)
#   MVP_DEBIAN_MIRROR Debian mirror (default http://deb.debian.org/debian)
# Options:
#   --print-tag      print the image reference and exit without building
# Exit status: 0 on success; 1 with a message naming the failed step.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=${MVP_IMAGE_REPO:-mvp-ray-node}
BUILD_DIR=${MVP_BUILD_DIR:-/var/tmp}
MIRROR=${MVP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
VENV=/opt/mvp/venv

TAG=$(cat "$HERE/build.sh" "$HERE/requirements.txt" | sha256sum | cut -c1-12)
IMAGE="$REPO:$TAG"

say() { printf '[build-image] %s\n' "$*" >&2; }
die() { printf '[build-image] ERROR: %s\n' "$*" >&2; exit 1; }

if [ "${1:-}" = "--print-tag" ]; then
  echo "$IMAGE"
  exit 0
fi

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "image $IMAGE exists (recipe unchanged): skip build."
  echo "MVP_IMAGE=$IMAGE STATUS=exists"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "building the image needs root (debootstrap, chroot)."
if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap (apt-get)."
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; } \
    || die "apt-get install debootstrap failed."
fi

PACKAGES=python3,python3-venv,python3-pip,openssh-server,procps,iproute2,ca-certificates
# The debootstrap result is cached on this machine (keyed by its package list):
# a recipe change that only touches requirements.txt skips the minute it takes.
BASE="$BUILD_DIR/mvp-debootstrap-bookworm-$(echo "$PACKAGES" | sha256sum | cut -c1-8)"
ROOTFS="$BUILD_DIR/mvp-rootfs-$TAG"
cleanup() { umount "$ROOTFS/proc" 2>/dev/null || true; rm -rf "$ROOTFS"; }
trap cleanup EXIT

if [ ! -f "$BASE/.mvp-complete" ]; then
  say "debootstrap bookworm into $BASE (about a minute)."
  rm -rf "$BASE"
  mkdir -p "$BASE"
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$BASE" "$MIRROR" \
    >"$BASE.log" 2>&1 || die "debootstrap failed; see $BASE.log"
  touch "$BASE/.mvp-complete"
else
  say "reusing the debootstrap tree $BASE."
fi
rm -rf "$ROOTFS"
cp -a "$BASE" "$ROOTFS"
rm -f "$ROOTFS/.mvp-complete"

say "creating $VENV and installing $(grep -vc '^#' "$HERE/requirements.txt") pinned packages."
cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
cp "$HERE/requirements.txt" "$ROOTFS/tmp/requirements.txt"
# Trust the same certificate authorities as this host (TLS-intercepting proxies).
HOST_CA=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
PIP_CA_ARGS=()
if [ -f "$HOST_CA" ]; then
  cp "$HOST_CA" "$ROOTFS/tmp/host-ca.crt"
  PIP_CA_ARGS=(--cert /tmp/host-ca.crt)
fi
mount -t proc proc "$ROOTFS/proc"
chroot "$ROOTFS" python3 -m venv "$VENV" || die "venv creation failed."
# A clean environment: the host's PIP_* settings (local wheel folders, CA paths) do not
# exist inside the chroot; only an explicit index URL is passed on.
chroot "$ROOTFS" env -i PATH=/usr/bin:/bin HOME=/root ${PIP_INDEX_URL:+PIP_INDEX_URL=$PIP_INDEX_URL} \
  "$VENV/bin/pip" install -q --no-cache-dir --disable-pip-version-check "${PIP_CA_ARGS[@]}" -r /tmp/requirements.txt \
  || die "pip install inside the image failed."
umount "$ROOTFS/proc"
rm -f "$ROOTFS/tmp/requirements.txt" "$ROOTFS/tmp/host-ca.crt"
mkdir -p "$ROOTFS/run/sshd"
rm -rf "$ROOTFS/var/cache/apt/archives"/*.deb "$ROOTFS/var/lib/apt/lists"/*

say "importing the root filesystem as $IMAGE."
tar -C "$ROOTFS" -c . | docker import \
  --change "ENV PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change 'CMD ["sleep", "infinity"]' \
  --change "LABEL org.mvp.recipe=$TAG" \
  - "$IMAGE" >/dev/null || die "docker import failed."
say "built $IMAGE."
echo "MVP_IMAGE=$IMAGE STATUS=built"
