#!/usr/bin/env bash
# Lays out, at the folder given, a tree of links as the wheel installs the packages:
# mypy and import-linter cannot follow setuptools' package-dir mapping
# (eventcraft.eventstore is the folder ./eventstore). Run from the project root.
set -euo pipefail
tree=$1
rm -rf "$tree"
mkdir -p "$tree/eventcraft"
for entry in eventcraft/*; do ln -s "$PWD/$entry" "$tree/eventcraft/"; done
for package in eventstore domain projections sagas messaging; do ln -s "$PWD/$package" "$tree/eventcraft/$package"; done
