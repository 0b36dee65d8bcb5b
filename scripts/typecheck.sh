#!/usr/bin/env bash
# mypy cannot follow setuptools' package-dir mapping (eventcraft.eventstore is
# the folder ./eventstore), so it checks a tree of links laid out as the wheel is.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build/typecheck
rm -rf "$tree"
mkdir -p "$tree/eventcraft"
for entry in eventcraft/*; do ln -s "$PWD/$entry" "$tree/eventcraft/"; done
for package in eventstore domain projections sagas messaging; do ln -s "$PWD/$package" "$tree/eventcraft/$package"; done
exec "${MYPY:-mypy}" "$tree/eventcraft" examples tests benchmarks "$@"
