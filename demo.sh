#!/usr/bin/env bash
# Install streamsql into .venv and run the demo job on the embedded catalog (local Spark).
set -euo pipefail
cd "$(dirname "$0")"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
exec .venv/bin/streamsql run queries/demo.sql
