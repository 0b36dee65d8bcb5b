#!/usr/bin/env bash
# Make sure the PostgreSQL the tests use is installed and accepting connections, and
# PgBouncer installed beside it. EVENTCRAFT_TEST_PG names the server; by default the
# local one with trust auth.
set -euo pipefail
url="${EVENTCRAFT_TEST_PG:-postgresql://postgres@127.0.0.1:5432/test}"

if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "ensure-postgres: installing PostgreSQL from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends postgresql postgresql-client >/dev/null
fi

# PgBouncer, which tests/pgbouncer.py starts in front of the server on a port of its own
# (the store behind a pooler): installed only, never started or configured here.
if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
  echo "ensure-postgres: installing PgBouncer from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null
fi

ready() { pg_isready -q -d "$url" 2>/dev/null; }
if ! ready; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "ensure-postgres: starting cluster $version/main"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 60); do ready && break; sleep 0.5; done
fi
ready || { echo "ensure-postgres: PostgreSQL at $url is not accepting connections" >&2; exit 1; }

# A fresh cluster may lack the role, the database or trust auth on TCP.
if ! psql "$url" -qtAc 'select 1' >/dev/null 2>&1; then
  db=$(basename "${url%%\?*}")
  su postgres -c "psql -qtAc \"select 1 from pg_database where datname='$db'\"" | grep -q 1 \
    || su postgres -c "createdb '$db'"
fi
psql "$url" -qtAc 'select 1' >/dev/null
