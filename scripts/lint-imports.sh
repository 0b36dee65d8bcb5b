#!/usr/bin/env bash
# import-linter (grimp) reads a tree of links laid out as the wheel is
# (scripts/wheel-tree.sh), as mypy does.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build/imports
bash scripts/wheel-tree.sh "$tree"
# From inside the tree: the folder it is run from comes first on the path, and the
# root's own eventcraft/ holds only the shell.
config="$PWD/pyproject.toml"
cd "$tree"
PYTHONPATH="$PWD" exec "${LINT_IMPORTS:-lint-imports}" --config "$config" "$@"
