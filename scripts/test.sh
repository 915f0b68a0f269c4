#!/usr/bin/env bash
# Install everything the test suite needs, then run it: lint, types, import contracts, tests.
# Works on a fresh Debian machine with Python 3.11 as root; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: Graphviz's `dot` renders diagrams; Chromium opens the HTML pages;
# tmux runs the terminal debugger under a real terminal; PostgreSQL's initdb and pg_ctl start the throwaway cluster the run store tests use.
missing=()
command -v dot >/dev/null || missing+=(graphviz)
command -v chromium >/dev/null || missing+=(chromium)
command -v tmux >/dev/null || missing+=(tmux)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null \
    || missing+=(postgresql)
if ((${#missing[@]})); then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev,docs]'

.venv/bin/ruff check helikon tests bench charts docs/griffe_values.py
.venv/bin/ruff format --check helikon tests bench charts docs/griffe_values.py
.venv/bin/mypy
.venv/bin/lint-imports
.venv/bin/pytest "$@"
