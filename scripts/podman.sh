#!/usr/bin/env bash
# Podman as the engine behind the `docker` backend, with base images built offline.
#
#   scripts/podman.sh setup    install podman/runc/debootstrap, build the base image (idempotent)
#   scripts/podman.sh start    start `podman system service` on a socket; prints `export DOCKER_HOST=...`
#   scripts/podman.sh stop     stop the service started by `start`
#   scripts/podman.sh env      print the exports (CONTAINERS_CONF, DOCKER_HOST) without starting anything
#
# No image registry is reachable from here, so the base image hrbench/debian:bookworm is a
# debootstrap rootfs imported with `podman import`. It carries a local apt repository
# (file:/opt/hrbench-debs, the packages in HRBENCH_LOCAL_DEBS fetched with `apt-get download`)
# as its only apt source, so a task Dockerfile's `apt-get update && apt-get install -y tree`
# builds with the network off. Everything is cached under HRBENCH_PODMAN_DIR: a second run
# with the image present takes well under a second.
set -euo pipefail

DIR=${HRBENCH_PODMAN_DIR:-/var/cache/hrbench/podman}
IMAGE=${HRBENCH_BASE_IMAGE:-hrbench/debian:bookworm}
SUITE=bookworm
# The base system: what the built-in tasks' solutions and verifiers call (python3, ps, column), and
# bubblewrap for checks.sh's `untrusted` (the verifier runs agent code in a nested sandbox).
BASE_PACKAGES=python3,procps,bsdextrautils,bubblewrap
# Served by the image's local apt repository (a task may `apt-get install` them offline), with the
# dependencies the base system lacks: tree is what the docker-only fixture task installs (the host
# lacks it, so `local` refuses that task), openssl what a built-in task's Dockerfile installs.
LOCAL_DEBS=${HRBENCH_LOCAL_DEBS:-tree openssl}
CONF="$DIR/containers.conf"
SOCK="$DIR/podman.sock"
# Revision of the recipe below: bump it to rebuild images built by an older recipe.
RECIPE=2

mirror() {
  # The Debian mirror this host's apt uses (deb822 or one-line sources), else the default.
  local url
  url=$(grep -hsoE '^(URIs:|deb) +[^ ]*debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
        | grep -v security | head -1 | awk '{print $2}')
  echo "${url:-http://deb.debian.org/debian}"
}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

install_tools() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v dpkg-scanpackages >/dev/null || missing+=(dpkg-dev)
  command -v curl >/dev/null || missing+=(curl)
  if ((${#missing[@]})); then
    echo "podman.sh: installing ${missing[*]}" >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

write_conf() {
  mkdir -p "$DIR"
  # runc: crun is not installed here; the ulimits keep podman's defaults within the host's.
  cat >"$CONF.tmp" <<'EOF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
# never hand the host's proxy variables to a container (no host environment goes in)
http_proxy = false
[engine]
runtime = "runc"
# no systemd on these machines: cgroupfs and a file event log work everywhere
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  mv "$CONF.tmp" "$CONF"
}

closure() {
  # LOCAL_DEBS and their dependencies (recursively, no recommends), minus what the base rootfs has
  local installed
  installed=$(dpkg-query --admindir="$DIR/rootfs-$SUITE/var/lib/dpkg" -W -f '${Package}\n')
  # shellcheck disable=SC2086  # a word list on purpose
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
      --no-enhances $LOCAL_DEBS 2>/dev/null | grep -v '^ ' | grep -v '^<' | sort -u | grep -vxF "$installed" || true
}

build_debs() {
  local debs="$DIR/debs" want
  want="recipe=$RECIPE $LOCAL_DEBS"
  [ -f "$debs/Packages" ] && [ "$(cat "$debs/.list" 2>/dev/null)" = "$want" ] && return
  rm -rf "$debs.tmp" && mkdir -p "$debs.tmp"
  local pkgs
  pkgs=$(closure)
  # no package lists yet (a fresh machine), or stale ones: update once and ask again
  # shellcheck disable=SC2086  # a word list on purpose
  if [ -z "$pkgs" ] || ! (cd "$debs.tmp" && apt-get download -q $pkgs >/dev/null 2>&1); then
    as_root apt-get update -qq
    pkgs=$(closure)
    [ -z "$pkgs" ] || (cd "$debs.tmp" && apt-get download -q $pkgs >/dev/null)
  fi
  (cd "$debs.tmp" && dpkg-scanpackages --multiversion . /dev/null 2>/dev/null >Packages)
  echo "$want" >"$debs.tmp/.list"
  rm -rf "$debs" && mv "$debs.tmp" "$debs"
}

build_rootfs() {
  local rootfs="$DIR/rootfs-$SUITE"
  [ -f "$rootfs/.hrbench-recipe-$RECIPE" ] && return
  rm -rf "$rootfs.tmp"
  echo "podman.sh: debootstrap $SUITE from $(mirror) (a few minutes, once)" >&2
  as_root debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$rootfs.tmp" "$(mirror)" >"$DIR/debootstrap.log" 2>&1 \
    || { echo "podman.sh: debootstrap failed, see $DIR/debootstrap.log" >&2; tail -5 "$DIR/debootstrap.log" >&2; exit 1; }
  # The image's only apt source is the local repository: builds work with the network off.
  rm -rf "$rootfs.tmp/var/lib/apt/lists/"* "$rootfs.tmp/var/cache/apt/archives/"*.deb
  rm -f "$rootfs.tmp/etc/apt/sources.list" "$rootfs.tmp/etc/apt/sources.list.d/"*
  echo "deb [trusted=yes] file:/opt/hrbench-debs ./" >"$rootfs.tmp/etc/apt/sources.list.d/hrbench-local.list"
  touch "$rootfs.tmp/.hrbench-recipe-$RECIPE"
  rm -rf "$rootfs" && mv "$rootfs.tmp" "$rootfs"
}

build_image() {
  local stamp="$DIR/debs/.list"
  local want; want=$(cat "$stamp")
  if podman image exists "$IMAGE" \
     && [ "$(podman image inspect --format '{{index .Labels "org.hrbench.recipe"}}' "$IMAGE" 2>/dev/null)" = "$want" ]; then
    return
  fi
  local rootfs="$DIR/rootfs-$SUITE"
  rm -rf "$rootfs/opt/hrbench-debs" && mkdir -p "$rootfs/opt" && cp -a "$DIR/debs" "$rootfs/opt/hrbench-debs"
  echo "podman.sh: importing $IMAGE" >&2
  tar -C "$rootfs" --exclude="./.hrbench-recipe-*" -c . \
    | podman import --change "LABEL org.hrbench.recipe=\"$want\"" --change 'CMD ["/bin/bash"]' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$IMAGE" \
        >/dev/null 2>"$DIR/import.log" || { cat "$DIR/import.log" >&2; exit 1; }
  # oracle-state images were built on the old base: drop them (the docker backend rebuilds on demand)
  podman images --format '{{.Repository}}:{{.Tag}}' | grep -E '^(localhost|docker\.io)/hrbench-env/' | xargs -r podman rmi -f >/dev/null 2>&1 || true
}

ping_sock() { [ -S "$SOCK" ] && curl -fsS --max-time 2 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; }

case "${1:-setup}" in
  setup)
    install_tools
    write_conf
    build_rootfs
    build_debs
    CONTAINERS_CONF="$CONF" build_image
    echo "podman.sh: ready ($IMAGE; CONTAINERS_CONF=$CONF)" >&2
    ;;
  start)
    write_conf
    if ! ping_sock; then
      rm -f "$SOCK"
      CONTAINERS_CONF="$CONF" nohup podman system service --time=0 "unix://$SOCK" >"$DIR/service.log" 2>&1 &
      echo $! >"$DIR/service.pid"
      for _ in $(seq 100); do ping_sock && break; sleep 0.1; done
      ping_sock || { echo "podman.sh: the service did not answer on $SOCK; see $DIR/service.log" >&2; exit 1; }
    fi
    echo "export CONTAINERS_CONF=$CONF DOCKER_HOST=unix://$SOCK"
    ;;
  stop)
    if [ -f "$DIR/service.pid" ]; then kill "$(cat "$DIR/service.pid")" 2>/dev/null || true; rm -f "$DIR/service.pid" "$SOCK"; fi
    ;;
  env)
    echo "export CONTAINERS_CONF=$CONF DOCKER_HOST=unix://$SOCK"
    ;;
  *)
    echo "usage: scripts/podman.sh [setup|start|stop|env]" >&2
    exit 2
    ;;
esac
