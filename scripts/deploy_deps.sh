#!/usr/bin/env bash
# System packages the deployment tests need: PostgreSQL (Dagster storage), Chromium (UI screenshots) and nginx
# (the authenticating proxy of deploy/nginx-dagster.conf).
# Idempotent; Debian package names.
set -euo pipefail
missing=()
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || missing+=(postgresql)
command -v chromium >/dev/null || missing+=(chromium)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "deploy_deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
