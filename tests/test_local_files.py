"""Hadoop's local file system without a chmod process per file (runtime.local_files): the
same job writes the same files, with the same permissions, and starts no chmod."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamsql.runtime import local_files
from streamsql.runtime.local_files import CLASS_PATH_KEY, FILE_SYSTEM, FS_KEY, with_local_files
from tests.conftest import ROOT, counting_command, write


@pytest.fixture
def jar(tmp_path, monkeypatch) -> Path:
    """A stand-in for the built jar (no javac run)."""
    path = write(tmp_path / "streamsql-hadoop.jar", "")
    monkeypatch.setattr(local_files, "built_jar", lambda: path)
    return path


def test_a_local_master_gets_the_file_system_and_its_jar(jar):
    conf = with_local_files({"spark.master": "local[2]", CLASS_PATH_KEY: "/opt/mine.jar"})
    assert conf[FS_KEY] == FILE_SYSTEM
    assert conf[CLASS_PATH_KEY] == f"/opt/mine.jar{os.pathsep}{jar}"  # the user's class path kept
    assert with_local_files({})[FS_KEY] == FILE_SYSTEM  # (no master: local[*])


def test_a_cluster_or_a_file_system_of_the_users_is_left_alone(jar, monkeypatch):
    for conf in ({"spark.master": "spark://host:7077"}, {"spark.master": "yarn"}, {"spark.master": "local-cluster[2,1,1024]"},
                 {"spark.master": "local[2]", FS_KEY: "org.apache.hadoop.fs.RawLocalFileSystem"}):
        assert with_local_files(conf) == conf
    monkeypatch.setattr(local_files, "built_jar", lambda: None)  # no javac, or the build failed
    assert with_local_files({"spark.master": "local[2]"}) == {"spark.master": "local[2]"}


def test_no_javac_means_no_jar(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert local_files.built_jar() is None
    assert not (tmp_path / "cache" / "streamsql" / "hadoop").exists()


@pytest.mark.spark
def test_the_jar_is_built_once_and_holds_the_classes(tmp_path, monkeypatch):
    import zipfile

    from streamsql.runtime.spark_home import jdk_command

    if jdk_command("javac") is None:
        pytest.skip("no javac on this machine")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    jar = local_files.built_jar()
    assert jar is not None and jar.parent == tmp_path / "cache" / "streamsql" / "hadoop"
    assert {"streamsql/hadoop/LocalFileSystem.class", "streamsql/hadoop/PosixLocalFileSystem.class"} <= \
        set(zipfile.ZipFile(jar).namelist())
    built = jar.stat().st_mtime_ns
    assert local_files.built_jar() == jar and jar.stat().st_mtime_ns == built  # not built again
    assert [p.name for p in jar.parent.iterdir()] == [jar.name]  # no staged file left


def _modes(folder: Path) -> dict[str, str]:
    """Each file's and directory's permissions under ``folder``, by its path with the
    generated part of its name (a job key, a micro-batch's id) left out."""
    import re

    found = {}
    for path in sorted(folder.rglob("*")):
        name = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|[0-9a-f]{12}", "X", str(path.relative_to(folder)))
        found[name] = oct(path.stat().st_mode & 0o7777)
    return found


@pytest.mark.spark
def test_a_streamed_window_insert_runs_no_chmod_and_writes_what_hadoop_writes(tmp_path):
    folder = tmp_path / "parts"
    for i in range(3):
        os.utime(write(folder / f"part-{i}.csv", f"a,{i},2026-01-01 00:0{i}:00\nb,{i},2026-01-01 00:0{i}:30\n"),
                 (time.time() - 100 + i,) * 2)
    log = tmp_path / "chmod.log"
    counting_command(tmp_path / "bin", "chmod", log)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")

    def run(name: str, *conf: str) -> dict[str, str]:
        out = tmp_path / name
        script = write(tmp_path / f"{name}.sql", (
            f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)"
            f" WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv',"
            f" 'source.max-files-per-batch' = '1');\n"
            f"CREATE TEMPORARY TABLE o (k STRING, n BIGINT, we TIMESTAMP(3)) WITH ('connector' = 'filesystem',"
            f" 'path' = '{out / 'table'}', 'format' = 'csv');\n"
            "SET 'execution.bounded-input' = 'stream';\n"
            "INSERT INTO o SELECT k, COUNT(*), window_end FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts),"
            " INTERVAL '1' MINUTE)) GROUP BY k, window_start, window_end;\n"))
        result = subprocess.run([sys.executable, str(ROOT / "cli.py"), "run", *conf, str(script)],
                                capture_output=True, text=True, cwd=tmp_path, timeout=300,
                                env={**env, "STREAMSQL_CATALOG": str(out / "catalog")},
                                # a umask unlike Hadoop's (022): a permission not set shows
                                preexec_fn=lambda: os.umask(0o077))
        assert result.returncode == 0, result.stderr
        rows = sorted(line for p in (out / "table").glob("part-*") for line in p.read_text().splitlines())
        assert rows == sorted(f"{k},1,2026-01-01 00:0{i + 1}:00.000" for i in range(3) for k in "ab")
        return _modes(out)

    ours = run("ours")
    assert not log.exists()  # three micro-batches of state, offsets, commits and files: no chmod
    hadoops = run("hadoops", "--conf", f"{FS_KEY}=org.apache.hadoop.fs.LocalFileSystem")
    assert len(log.read_text().splitlines()) > 20  # the control: Hadoop's own runs one per file
    assert ours == hadoops and "0o644" in ours.values() and "0o755" in ours.values()
