"""Spark's checkpoint files written without a process per file (runtime.session): Spark's
default checkpoint manager renames each file through Hadoop's FileContext, whose local file
system runs `readlink` for every rename; streamsql's default writes them through Hadoop's
FileSystem, whose rename is a plain (atomic, replacing) POSIX rename."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import time

import pytest

from streamsql.runtime.session import FILE_SYSTEM_CHECKPOINTS, default_conf
from tests.conftest import ROOT, counting_command, write

FILE_CONTEXT_CHECKPOINTS = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"


def test_the_default_checkpoint_manager_is_the_file_system_one():
    assert default_conf()["spark.sql.streaming.checkpointFileManagerClass"] == FILE_SYSTEM_CHECKPOINTS


@pytest.mark.spark
def test_a_streamed_group_by_runs_no_readlink_process_per_checkpoint_file(tmp_path):
    folder = tmp_path / "parts"
    for i in range(3):
        os.utime(write(folder / f"part-{i}.csv", f"a,{i}\nb,{10 * i}\n"), (time.time() - 100 + i,) * 2)
    log = tmp_path / "readlink.log"
    counting_command(tmp_path / "bin", "readlink", log)
    script = write(tmp_path / "job.sql", (
        f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem',"
        f" 'path' = '{folder}', 'format' = 'csv', 'source.max-files-per-batch' = '1');\n"
        "SET 'execution.bounded-input' = 'stream';\n"
        "SELECT k, SUM(v) AS total FROM t GROUP BY k;\n"))
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
               STREAMSQL_CATALOG=str(tmp_path / "catalog"))

    def run(*conf: str) -> list[list[str]]:
        result = subprocess.run([sys.executable, str(ROOT / "cli.py"), "run", *conf, "--format", "csv", str(script)],
                                capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
        assert result.returncode == 0, result.stderr
        header, *rows = csv.reader(io.StringIO(result.stdout))
        assert header == ["op", "k", "total"]  # bounded input run as a stream: its changelog
        return rows

    changelog = run()
    assert changelog[-4:] == [["-U", "a", "1"], ["+U", "a", "3"], ["-U", "b", "10"], ["+U", "b", "30"]], changelog
    assert not log.exists()  # three micro-batches with state: no readlink
    # the control: Spark's own default runs one per checkpoint file it renames
    assert run("--conf", f"spark.sql.streaming.checkpointFileManagerClass={FILE_CONTEXT_CHECKPOINTS}") == changelog
    assert len(log.read_text().splitlines()) >= 3
