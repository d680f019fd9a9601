#!/usr/bin/env bash
# Install streamsql with its test dependencies into .venv, then run the test suite.
set -euo pipefail
cd "$(dirname "$0")"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
# Two test processes (pytest-xdist), each file's tests in one of them (its servers and data
# started once): most of a Spark test's time is a JVM or a micro-batch trigger waiting, and
# the whole suite took 25.7 min in one process against 21.5 in two on 2 cores. More cores,
# more processes (at most 4: each has a JVM of its own). '-n 0' runs in this process.
# --thorough: the randomized model tests at full depth (tests/depth.py); a plain
# 'pytest -m "not spark"' runs them quick while you work.
workers="$(python3 -c 'import os; print(max(2, min(4, len(os.sched_getaffinity(0)))))')"
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --thorough "$@"
