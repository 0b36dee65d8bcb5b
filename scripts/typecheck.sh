#!/usr/bin/env bash
# mypy checks a tree of links laid out as the wheel is (scripts/wheel-tree.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build/typecheck
bash scripts/wheel-tree.sh "$tree"
exec "${MYPY:-mypy}" "$tree/eventcraft" examples tests benchmarks docs/hooks.py docs/hooks_docstrings.py "$@"
