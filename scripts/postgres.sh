#!/usr/bin/env bash
# A private PostgreSQL server for Dagster's run/event/schedule storage (tests, a laptop, a first deployment).
#
#   scripts/postgres.sh start DIR PORT   # initdb DIR if new, start on 127.0.0.1:PORT, create database `dagster`
#   scripts/postgres.sh stop DIR
#
# Installs Debian's `postgresql` package when missing. The server runs as the `postgres` user
# (PostgreSQL refuses to run as root), trusts local connections only (listen 127.0.0.1), and
# prints the URL to put in DAGSTER_PG_URL. A shared deployment uses its own managed server instead
# (docs/deploy.md).
set -euo pipefail
cmd=${1:?usage: postgres.sh start DIR PORT | stop DIR}
dir=${2:?data directory}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bin" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "postgres.sh: installing postgresql" >&2
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi
as_pg=(); [ "$(id -u)" -eq 0 ] && as_pg=(runuser -u postgres --)

case "$cmd" in
  start)
    port=${3:?port}
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    if [ ! -f "$dir/PG_VERSION" ]; then
      "${as_pg[@]}" "$bin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 >/dev/null
    fi
    "${as_pg[@]}" "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
    "${as_pg[@]}" "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='dagster'" | grep -q 1 \
      || "${as_pg[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres dagster
    echo "postgresql+psycopg2://postgres@127.0.0.1:$port/dagster"  # psycopg2: what dagster-postgres installs
    ;;
  stop)
    "${as_pg[@]}" "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
    ;;
  *) echo "usage: postgres.sh start DIR PORT | stop DIR" >&2; exit 2 ;;
esac
