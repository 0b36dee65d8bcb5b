#!/usr/bin/env bash
# Spark reads a PostgreSQL store in the JVM through Debian's JDBC driver
# (projections/spark/jdbc.py); nothing is downloaded at run time.
set -euo pipefail
if [ -f /usr/share/java/postgresql.jar ]; then
  exit 0
fi
echo "ensure-jdbc: installing the PostgreSQL JDBC driver from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends libpostgresql-jdbc-java >/dev/null
