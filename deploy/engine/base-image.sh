#!/usr/bin/env bash
# The images' base without a container registry: a Debian bookworm root filesystem made with
# debootstrap (python3 + venv, CA certificates), imported into the local engine and tagged
# (default localhost/moria/python:3.11-bookworm). The Dockerfiles take it as
#   --build-arg BASE_IMAGE=localhost/moria/python:3.11-bookworm
# in place of python:3.11.13-slim-bookworm (`make images` does this by itself when no registry
# answers). Run as root (debootstrap): sudo deploy/engine/base-image.sh [--force] [TAG]
#
# Idempotent: does nothing when TAG exists in the engine, unless --force (or MORIA_FORCE=1).
# The host's apt mirror is used (MORIA_DEBIAN_MIRROR overrides), and the host's extra CA
# certificates (/usr/local/share/ca-certificates) are trusted inside, so apt and pip in the
# image builds reach what the host reaches. About a minute on 2 cores.
set -euo pipefail

force=${MORIA_FORCE:-0}
tag=localhost/moria/python:3.11-bookworm
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) tag=$arg ;;
  esac
done

engine=${MORIA_ENGINE:-$(command -v podman || command -v docker || true)}
if [ -z "$engine" ]; then
  echo "base-image.sh: no podman or docker; run deploy/engine/setup.sh first" >&2
  exit 1
fi
if [ "$force" != 1 ] && "$engine" image inspect "$tag" >/dev/null 2>&1; then
  echo "base image: $tag exists (--force to rebuild)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "base-image.sh: run as root (debootstrap)" >&2
  exit 1
fi
command -v debootstrap >/dev/null || { echo "base-image.sh: debootstrap missing (deploy/engine/setup.sh installs it)" >&2; exit 1; }

# the host's Debian mirror: deb822 sources first, then one-line ones; a non-Debian host (Ubuntu)
# gets deb.debian.org
mirror=${MORIA_DEBIAN_MIRROR:-}
if [ -z "$mirror" ] && grep -qs '^ID=debian' /etc/os-release; then
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  if [ -z "$mirror" ]; then
    mirror=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' \
      /etc/apt/sources.list 2>/dev/null || true)
  fi
fi
mirror=${mirror:-http://deb.debian.org/debian}

work=$(mktemp -d /var/tmp/moria-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
start=$(date +%s)
echo "base image: debootstrap bookworm from $mirror"
debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
  bookworm "$rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 \
  || { tail -30 "$work/debootstrap.log" >&2; exit 1; }

# apt inside: the release, its updates and the security archive (from the same host as the mirror
# when it is a Debian mirror, else Debian's)
security=${mirror%/debian}/debian-security
[ "$security" = "$mirror/debian-security" ] && security=http://deb.debian.org/debian-security
cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
SOURCES

extra=$(find /usr/local/share/ca-certificates -name '*.crt' 2>/dev/null | wc -l)
if [ "$extra" -gt 0 ]; then
  cp -r /usr/local/share/ca-certificates/. "$rootfs/usr/local/share/ca-certificates/"
  chroot "$rootfs" update-ca-certificates > /dev/null 2>&1
  echo "base image: trusts the host's $extra extra CA certificate(s)"
fi
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log \
  "$rootfs"/var/cache/debconf/*-old

tar --numeric-owner -C "$rootfs" -c . | "$engine" import \
  --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
  --message "moria base: debootstrap bookworm minbase + python3 ($mirror)" - "$tag" \
  > "$work/import.log" 2>&1 || { cat "$work/import.log" >&2; exit 1; }
size=$("$engine" image inspect --format '{{.Size}}' "$tag")
echo "base image: $tag built in $(( $(date +%s) - start )) s, $(( size / 1000000 )) MB," \
  "python $("$engine" run --rm "$tag" python --version 2>&1 | awk '{print $2}')"
