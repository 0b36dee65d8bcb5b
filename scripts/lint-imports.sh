#!/usr/bin/env bash
# import-linter (grimp) cannot follow setuptools' package-dir mapping either
# (eventcraft.eventstore is the folder ./eventstore), so it reads a tree of links
# laid out as the wheel is, as scripts/typecheck.sh does for mypy.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build/imports
rm -rf "$tree"
mkdir -p "$tree/eventcraft"
for entry in eventcraft/*; do ln -s "$PWD/$entry" "$tree/eventcraft/"; done
for package in eventstore domain projections sagas messaging; do ln -s "$PWD/$package" "$tree/eventcraft/$package"; done
# From inside the tree: the folder it is run from comes first on the path, and the
# root's own eventcraft/ holds only the shell.
config="$PWD/pyproject.toml"
cd "$tree"
PYTHONPATH="$PWD" exec "${LINT_IMPORTS:-lint-imports}" --config "$config" "$@"
