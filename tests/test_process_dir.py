"""Each process's temporary files in one directory: removed at exit, and after a kill -9 by
the next process (runtime.process_dir). Real processes, no JVM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamsql.runtime import process_dir as pd
from tests.conftest import ROOT

HOLD = """
import sys, time
from streamsql.runtime.process_dir import java_options, process_dir
folder = process_dir()
(folder / "spark-1").mkdir()
(folder / "spark-1" / "librocksdbjni.so").write_bytes(b"x" * 1000)
print(folder, java_options(), sep="\\n", flush=True)
if sys.argv[1] == "wait":
    time.sleep(120)
"""


def _start(tmp: Path, mode: str) -> subprocess.Popen:
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", HOLD, mode], env=env, stdout=subprocess.PIPE, text=True)


def _ours(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir())


@pytest.mark.spark  # starts a process
def test_a_process_s_directory_is_removed_at_exit_and_after_a_kill_by_the_next(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp / "someone-else").mkdir()  # not ours: never touched
    done = _start(tmp, "exit")
    folder, option = done.communicate(60)[0].split("\n")[:2]
    assert done.returncode == 0 and Path(folder).parent == tmp and Path(folder).name.startswith(f"streamsql-process-{done.pid}-")
    assert option == f"-Djava.io.tmpdir={folder}"
    assert _ours(tmp) == ["someone-else"]  # removed at exit

    killed, living = _start(tmp, "wait"), _start(tmp, "wait")
    try:
        gone = Path(killed.stdout.readline().strip())
        kept = Path(living.stdout.readline().strip())
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert (gone / "spark-1" / "librocksdbjni.so").exists()  # a kill removes nothing itself
        # A new process removes the killed one's, and leaves the living one's
        after = _start(tmp, "exit")
        after.communicate(60)
        assert not gone.exists() and (kept / "spark-1").is_dir()
        assert _ours(tmp) == sorted(["someone-else", kept.name])
    finally:
        for p in (killed, living):
            p.kill()
            p.wait()
    assert pd.sweep(tmp) == [kept] and _ours(tmp) == ["someone-else"]


def test_a_directory_being_made_is_left_and_one_a_kill_left_staged_is_removed(tmp_path):
    fresh, old = tmp_path / f"{pd.STAGED}new", tmp_path / f"{pd.STAGED}old"
    fresh.mkdir()
    old.mkdir()
    stale = time.time() - pd.STAGED_SECONDS - 5
    os.utime(old, (stale, stale))
    unlocked = tmp_path / f"{pd.PREFIX}1-abc"  # its lock file gone: no process holds it
    unlocked.mkdir()
    assert sorted(pd.sweep(tmp_path)) == sorted([old, unlocked])
    assert fresh.is_dir()


def test_the_jvm_option_comes_before_a_user_s(monkeypatch):
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Djava.io.tmpdir=/mine")
    env = pd.with_process_dir({"SPARK_HOME": "/h"})
    folder = pd.process_dir()
    assert env == {"SPARK_HOME": "/h", "SPARK_SUBMIT_OPTS": f"-Djava.io.tmpdir={folder} -Djava.io.tmpdir=/mine"}
    assert pd.with_process_dir({"SPARK_SUBMIT_OPTS": "-Da=1"})["SPARK_SUBMIT_OPTS"].endswith(" -Da=1")
