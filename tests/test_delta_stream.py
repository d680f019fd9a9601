"""A Delta table as an unbounded source ('mode' = 'streaming', delta-flink's): its snapshot,
then each commit another engine (the deltalake library) appends while the job runs; a
restarted job goes on from its checkpoint; a commit that removes data stops it by name."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamsql.dialect.script import parse_script
from streamsql.errors import ConnectorError
from streamsql.plan.connectors import is_bounded
from streamsql.plan.define import define
from tests.conftest import in_background, wait_for


def table(sql: str):
    return define(parse_script(sql)[0].expression, "default_database")


@pytest.mark.parametrize("extra, message", [
    (", 'mode' = 'forever'", "option 'mode' must be 'batch' or 'streaming'"),
    (", 'startingVersion' = '2'", "option\\(s\\) 'startingVersion' need 'mode' = 'streaming'"),
    (", 'mode' = 'streaming', 'versionAsOf' = '1'", "reads one snapshot; a 'mode' = 'streaming' table reads every"),
    (", 'mode' = 'streaming', 'startingVersion' = 'first'", "'startingVersion' must be a non-negative integer"),
    (", 'mode' = 'streaming', 'ignoreChanges' = 'yes'", "'ignoreChanges' must be 'true' or 'false'"),
])
def test_bad_streaming_options(extra, message):
    with pytest.raises(ConnectorError, match=message):
        table(f"CREATE TABLE t (a INT) WITH ('connector' = 'delta', 'table-path' = '/t'{extra})")


def test_streaming_mode_is_unbounded():
    ddl = "CREATE TABLE t (a INT) WITH ('connector' = 'delta', 'table-path' = '/t'{})"
    assert is_bounded(table(ddl.format("")))
    assert not is_bounded(table(ddl.format(", 'mode' = 'streaming'")))


def _append(path, ids, part="p1"):
    from deltalake import write_deltalake

    write_deltalake(str(path), pa.table({"id": pa.array(ids, pa.int64()), "part": [part] * len(ids)}), mode="append",
                    partition_by=["part"])


@pytest.mark.spark
def test_commits_stream_in_as_they_land_and_a_restart_goes_on(run, tmp_path):
    source, sink = tmp_path / "events", tmp_path / "out"
    _append(source, [1, 2, 3])
    _append(source, [4], "p2")
    script = ("SET 'execution.runtime-mode' = 'streaming';\n"
              f"CREATE TEMPORARY TABLE events (id BIGINT, part STRING) PARTITIONED BY (part) WITH ('connector' = 'delta',"
              f" 'table-path' = '{source}', 'mode' = 'streaming');\n"
              f"CREATE TEMPORARY TABLE copy (id BIGINT, part STRING) WITH ('connector' = 'filesystem', 'path' = '{sink}',"
              " 'format' = 'csv');\nINSERT INTO copy SELECT id * 10, part FROM events;\n")

    def written() -> list[str]:
        return sorted(line for f in sink.glob("part-*.csv") for line in f.read_text().splitlines())

    def stop(job):
        assert wait_for(lambda: run.engine.spark.streams.active or not job.is_alive(), 30)
        for query in run.engine.spark.streams.active:
            query.stop()
        job.join(60)

    job, errors = in_background(run, script)
    snapshot = ["10,p1", "20,p1", "30,p1", "40,p2"]
    assert wait_for(lambda: written() == snapshot or errors, 120), (written(), errors)
    _append(source, [5, 6])  # while it runs: read once its commit lands
    assert wait_for(lambda: written() == sorted(snapshot + ["50,p1", "60,p1"]) or errors, 120), (written(), errors)
    stop(job)
    assert not errors
    _append(source, [7], "p3")  # while it is stopped
    job, errors = in_background(run, script)
    expected = sorted(snapshot + ["50,p1", "60,p1", "70,p3"])
    assert wait_for(lambda: written() == expected or errors, 120), (written(), errors)
    # a commit that removes rows: the stream stops, naming the commit
    from deltalake import DeltaTable

    DeltaTable(str(source)).delete("id = 1")
    assert wait_for(lambda: errors or not job.is_alive(), 120)
    stop(job)
    assert written() == expected
    assert len(errors) == 1 and isinstance(errors[0], ConnectorError), errors
    assert "Delta commit 4 removes data" in str(errors[0]) and "'ignoreChanges' = 'true'" in str(errors[0])
