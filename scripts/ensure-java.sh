#!/usr/bin/env bash
# The Spark parts (the `spark` extra, its tests and benchmarks) run on Java 17.
set -euo pipefail
if command -v java >/dev/null 2>&1 && java -version 2>&1 | grep -qE 'version "(1[7-9]|2[0-9])'; then
  exit 0
fi
echo "ensure-java: installing Java 17 from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null
