#!/usr/bin/env bash
# ensure-docker.sh: make a Docker engine answer on this machine.
#
# If `docker info` already answers, do nothing. Otherwise (as root):
#   1. install Debian's docker.io package when dockerd is missing;
#   2. start dockerd in the background with --storage-driver=overlay2 and its
#      data root on local disk; when overlay2 does not come up, retry with vfs.
# Environment:
#   MVP_DOCKER_DATA_ROOT  data root for dockerd (default /var/lib/docker)
#   MVP_DOCKER_LOG        dockerd log file (default /var/log/mvp-dockerd.log)
#   MVP_DOCKER_WAIT       seconds to wait for the engine to answer (default 60)
# Exit status: 0 when the engine answers, 1 with a message saying why not.
set -euo pipefail

DATA_ROOT=${MVP_DOCKER_DATA_ROOT:-/var/lib/docker}
LOG=${MVP_DOCKER_LOG:-/var/log/mvp-dockerd.log}
WAIT=${MVP_DOCKER_WAIT:-60}

say() { printf '[ensure-docker] %s\n' "$*"; }
die() { printf '[ensure-docker] ERROR: %s\n' "$*" >&2; exit 1; }

engine_answers() { docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && engine_answers; then
  say "Docker engine already answers ($(docker info --format '{{.ServerVersion}} {{.Driver}}'))."
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "no Docker engine answers and this is not root: start dockerd yourself or re-run as root."

if ! command -v dockerd >/dev/null 2>&1; then
  say "dockerd not found: installing Debian's docker.io (apt-get)."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed: is the Debian package mirror reachable?"
  apt-get install -y -qq docker.io >/dev/null || die "apt-get install docker.io failed."
fi

start_dockerd() {
  local driver=$1
  say "starting dockerd (storage driver $driver, data root $DATA_ROOT, log $LOG)."
  mkdir -p "$DATA_ROOT" "$(dirname "$LOG")"
  nohup dockerd --storage-driver="$driver" --data-root="$DATA_ROOT" >>"$LOG" 2>&1 &
  echo $! >/var/run/mvp-dockerd.pid
  local i
  for ((i = 0; i < WAIT; i++)); do
    if engine_answers; then
      say "Docker engine answers ($(docker info --format '{{.ServerVersion}} {{.Driver}}'))."
      return 0
    fi
    if ! kill -0 "$(cat /var/run/mvp-dockerd.pid)" 2>/dev/null; then
      say "dockerd ($driver) exited; last log lines:"
      tail -n 5 "$LOG" >&2 || true
      return 1
    fi
    sleep 1
  done
  say "dockerd ($driver) did not answer within ${WAIT}s."
  kill "$(cat /var/run/mvp-dockerd.pid)" 2>/dev/null || true
  return 1
}

# A stale pid file or socket from an earlier, dead dockerd blocks a new one.
rm -f /var/run/docker.pid
start_dockerd overlay2 || start_dockerd vfs \
  || die "dockerd did not start with overlay2 nor vfs; see $LOG."
