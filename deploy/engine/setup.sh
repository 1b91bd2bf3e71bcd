#!/usr/bin/env bash
# Container engine setup for Debian/Ubuntu hosts without a Docker daemon: podman + buildah (root),
# runc, netavark networking, catatonit (the init of Compose's `init: true`), debootstrap for the
# registry-less base image (base-image.sh).
# Idempotent: installs only what is missing, rewrites /etc/containers/containers.conf only when it
# differs from the settings below, and says what it did. Run as root: sudo deploy/engine/setup.sh
#
# Why these settings (all tried on a 2-core Debian 12 VM without systemd):
#   runtime = "runc"           crun refuses hosts with hybrid cgroups (v1 + v2);
#   cgroup_manager = cgroupfs  the systemd manager needs systemd as PID 1;
#   events_logger = "file"     journald likewise;
#   default_ulimits            podman's defaults are the (tiny) limits of the calling shell;
#   stop_timeout = 30          a bare `podman stop` waits 30 s before SIGKILL, not 10: Moria's
#                              servers drain for 25 s on SIGTERM (an image cannot carry this);
#   network_backend = netavark chosen, never guessed: podman 4 falls back to CNI when it finds
#                              CNI configs (another package's) and older state; Compose's DNS
#                              names (aardvark-dns) need netavark.
# Without systemd podman runs no health-check timers: `podman healthcheck run CTR` runs one.
set -euo pipefail

PACKAGES=(podman buildah runc iptables uidmap slirp4netns fuse-overlayfs netavark aardvark-dns
          catatonit debootstrap)
CONF=/etc/containers/containers.conf

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs packages and writes $CONF)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "setup.sh: needs apt-get (Debian/Ubuntu); install podman by your distribution's means" >&2
  exit 1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "packages: all present (${PACKAGES[*]})"
else
  echo "packages: installing ${missing[*]}"
  apt-get update -qq
  # a package this release lacks (e.g. netavark before Ubuntu 23.04) is skipped, not fatal
  available=()
  for pkg in "${missing[@]}"; do
    if [ -n "$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ && $2 != "(none)" {print $2}')" ]; then
      available+=("$pkg")
    else
      echo "packages: $pkg has no installation candidate here, skipped"
    fi
  done
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${available[@]}" \
    > /var/tmp/moria-engine-setup.log 2>&1 \
    || { tail -30 /var/tmp/moria-engine-setup.log >&2; exit 1; }
  echo "packages: installed ${available[*]}"
fi

wanted=$(cat <<'CONF'
# written by deploy/engine/setup.sh (Moria): rootful podman on a host without systemd
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
stop_timeout = 30

[network]
network_backend = "netavark"
CONF
)
mkdir -p "$(dirname "$CONF")"
if [ -f "$CONF" ] && [ "$(cat "$CONF")" = "$wanted" ]; then
  echo "config: $CONF already as wanted"
else
  if [ -f "$CONF" ]; then
    cp -p "$CONF" "$CONF.bak.$(date +%Y%m%d%H%M%S)"
    echo "config: $CONF differed; previous version kept as $CONF.bak.*"
  fi
  printf '%s\n' "$wanted" > "$CONF"
  echo "config: wrote $CONF"
fi

echo "engine: $(podman --version), runtime $(podman info --format '{{.Host.OCIRuntime.Name}}' 2>/dev/null || echo '?'), cgroups $(podman info --format '{{.Host.CgroupsVersion}}' 2>/dev/null || echo '?'), network $(podman info --format '{{.Host.NetworkBackend}}' 2>/dev/null || echo '?')"
