"""bench/serve_load.py stays runnable: a tiny load (3 clients x 5 statements) over the SQL
Gateway and HiveServer2 ends with no error and no session left open. Its times are figures,
never asserted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.spark  # starts both servers (a JVM each)
def test_a_tiny_load_has_no_errors_and_leaves_no_session():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "serve_load.py"), "--clients", "3", "--statements", "5",
                           "--rounds", "1", "--settle", "1"], capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = {server["server"]: server for server in json.loads(done.stdout.strip().splitlines()[-1])["load"]}
    assert set(results) == {"gateway", "hiveserver2"}
    for name, server in results.items():
        assert server["warm_up_errors"] == [], (name, server)
        (only,) = server["rounds"]
        assert only["statements"] == 15 and only["errors"] == 0, (name, only["error_samples"])
        assert only["left_open"]["sessions"] == 0 and only["left_open"]["operations"] == 0, (name, only)
    assert results["gateway"]["rounds"][0]["left_open"]["operation_threads"] == 0
