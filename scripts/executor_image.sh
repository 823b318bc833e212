#!/usr/bin/env bash
# The step containers' image for HRBENCH_EXECUTOR=docker (docs/deploy.md, Executors), built offline.
#
#   scripts/executor_image.sh     build hrbench/executor:bookworm unless it exists from this recipe and base
#
# It is scripts/podman.sh's base image (Debian 12: python3, bubblewrap, procps) plus git, whose .debs
# are fetched on this host with `apt-get download` and installed with dpkg (no registry, no network in
# the build). git is there so that a step computes the same code version (commit, dirty flag) as the
# process that launched it: the pre-registration hash depends on it. The code, the virtualenv and its
# Python are not in the image: the executor mounts them read-only at the paths they have here.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BASE=${HRBENCH_BASE_IMAGE:-hrbench/debian:bookworm}
IMAGE=${HRBENCH_EXECUTOR_IMAGE:-hrbench/executor:bookworm}
PACKAGES="git"
# Revision of the recipe below: bump it to rebuild images built by an older one.
RECIPE=1

eval "$("$REPO/scripts/podman.sh" env)"
export CONTAINERS_CONF
podman image exists "$BASE" || { echo "executor_image.sh: no $BASE: run scripts/podman.sh setup first" >&2; exit 1; }
want="recipe=$RECIPE base=$(podman image inspect --format '{{.Id}}' "$BASE") $PACKAGES"
if podman image exists "$IMAGE" \
   && [ "$(podman image inspect --format '{{index .Labels "org.hrbench.executor"}}' "$IMAGE")" = "$want" ]; then
  exit 0
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# name=version of every package in the base image
installed=$(podman run --rm --network none "$BASE" dpkg-query -W -f '${Package}=${Version}\n')
closure() {
  # PACKAGES and their dependencies (recursively, no recommends) at this host's candidate versions,
  # minus those the base image has at that version (its rootfs may predate a point release: then
  # e.g. perl-base comes along, since perl needs the same version)
  local all
  # shellcheck disable=SC2086  # a word list on purpose
  all=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
        --no-enhances $PACKAGES 2>/dev/null | grep -v '^ ' | grep -v '^<' | sort -u)
  # shellcheck disable=SC2086
  apt-cache policy $all | awk '/^[^ ].*:$/ {p = substr($1, 1, length($1) - 1)} /Candidate:/ {print p "=" $2}' \
    | grep -vxF "$installed" | cut -d= -f1 || true
}
mkdir "$ctx/debs"
pkgs=$(closure)
# shellcheck disable=SC2086
if [ -z "$pkgs" ] || ! (cd "$ctx/debs" && apt-get download -q $pkgs >/dev/null 2>&1); then
  apt-get update -qq  # no package lists yet (a fresh machine), or stale ones
  pkgs=$(closure)
  (cd "$ctx/debs" && apt-get download -q $pkgs >/dev/null)
fi
cat >"$ctx/Containerfile" <<CONTAINERFILE
FROM $BASE
COPY debs /tmp/debs
RUN dpkg -i /tmp/debs/*.deb >/dev/null && rm -rf /tmp/debs
LABEL org.hrbench.executor="$want"
CONTAINERFILE
echo "executor_image.sh: building $IMAGE" >&2
podman build -q --network none -t "$IMAGE" "$ctx" >/dev/null
