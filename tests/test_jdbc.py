"""The jdbc sink into a throwaway PostgreSQL server: upserts and deletes by key, plain inserts
without one, exactly once per micro-batch, and an INSERT INTO through the engine."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest

from streamsql.dialect.script import parse_script
from streamsql.errors import ConnectorError, ExecutionError
from streamsql.changelog import UPDATE_AFTER
from streamsql.plan.changelog_checks import accepted_kinds
from streamsql.plan.define import define
from tests.conftest import write

KV = "k BIGINT, v BIGINT, name STRING"


def table(sql: str):
    return define(parse_script(sql)[0].expression, "default_database")


def jdbc_ddl(name: str, url: str, schema: str = KV, key: str = "", extra: str = "") -> str:
    key = f", PRIMARY KEY ({key}) NOT ENFORCED" if key else ""
    return (f"CREATE TABLE {name} ({schema}{key}) WITH ('connector' = 'jdbc', 'url' = '{url}',"
            f" 'table-name' = '{name}', 'username' = 'postgres'{extra})")


# -- options, without Spark or PostgreSQL ----------------------------------------------------------


@pytest.mark.parametrize("options, message", [
    ("'connector' = 'jdbc', 'table-name' = 't'", "needs option\\(s\\) 'url'"),
    ("'connector' = 'jdbc', 'url' = 'jdbc:postgresql://h/db'", "needs option\\(s\\) 'table-name'"),
    ("'connector' = 'jdbc', 'url' = 'jdbc:postgresql://h/db', 'table-name' = 't', 'lookup.cache' = 'FULL'",
     "option 'lookup.cache' must be 'NONE' or 'PARTIAL', not 'FULL'"),
    ("'connector' = 'jdbc', 'url' = 'jdbc:mysql://h/db', 'table-name' = 't'", "PostgreSQL JDBC URL"),
    ("'connector' = 'jdbc', 'url' = 'jdbc:postgresql://h/db?reWriteBatchedInserts=true', 'table-name' = 't'",
     "URL parameter\\(s\\) 'reWriteBatchedInserts' not supported"),
    ("'connector' = 'jdbc', 'url' = 'jdbc:postgresql://h/db', 'table-name' = 't', 'driver' = 'com.mysql.Driver'",
     "option 'driver' must be 'org.postgresql.Driver'"),
    ("'connector' = 'jdbc', 'url' = 'jdbc:postgresql://h/db', 'table-name' = 't', 'sink.max-retries' = 'x'",
     "'sink.max-retries' must be a non-negative integer"),
    ("'connector' = 'jdbc', 'url' = 'jdbc:postgresql://h/db', 'table-name' = 't', 'sink.buffer-flush.interval' = 'soon'",
     "'sink.buffer-flush.interval' must be a duration"),
])
def test_bad_jdbc_options(options, message):
    with pytest.raises(ConnectorError, match=message):
        table(f"CREATE TABLE t (a INT) WITH ({options})")


def test_jdbc_options_and_updates_need_a_key():
    options = ("'connector' = 'jdbc', 'url' = 'jdbc:postgresql://h:5432/db', 'table-name' = 'public.t',"
               " 'driver' = 'org.postgresql.Driver', 'username' = 'u', 'password' = 'p',"
               " 'sink.buffer-flush.max-rows' = '500', 'sink.buffer-flush.interval' = '1s', 'sink.max-retries' = '2',"
               " 'sink.parallelism' = '2', 'connection.max-retry-timeout' = '30s'")
    keyed = table(f"CREATE TABLE t (a INT, b STRING, PRIMARY KEY (a) NOT ENFORCED) WITH ({options})")
    plain = table(f"CREATE TABLE t (a INT, b STRING) WITH ({options})")
    assert UPDATE_AFTER in accepted_kinds(keyed) and UPDATE_AFTER not in accepted_kinds(plain)
    with pytest.raises(ConnectorError, match="cannot write column 'r' of type ROW"):
        table(f"CREATE TABLE t (a INT, r ROW<x INT>) WITH ({options})")


def test_connection_parameters_from_the_url():
    from streamsql.runtime.jdbc_target import connection_parameters

    t = table("CREATE TABLE t (a INT) WITH ('connector' = 'jdbc', 'table-name' = 't', 'username' = 'u',"
              " 'url' = 'jdbc:postgresql://db.example:6543/shop?sslmode=require&currentSchema=sales')")
    assert connection_parameters(t) == {"host": "db.example", "port": 6543, "dbname": "shop", "sslmode": "require",
                                        "options": "-c TimeZone=UTC -c search_path=sales", "user": "u",
                                        "connect_timeout": 60}


# -- against PostgreSQL ------------------------------------------------------------------------------


def rows_of(connection, sql: str) -> list[tuple]:
    return sorted(connection.execute(sql).fetchall())


def changelog(spark, rows, partitions: int = 3):
    """A changelog DataFrame in this order over several partitions (slices keep the order)."""
    return spark.sparkContext.parallelize(rows, partitions).toDF(f"__rowkind STRING, {KV}")


BATCH_1 = [("+I", 1, 1, "a"), ("+I", 2, 1, "b"), ("-U", 1, 1, "a"), ("+U", 1, 2, "a2"), ("+I", 3, 1, "c"),
           ("-D", 3, 1, "c"), ("+I", 4, 1, "d")]
BATCH_2 = [("-U", 2, 1, "b"), ("+U", 2, 5, "b5"), ("-D", 4, 1, "d"), ("+I", 3, 7, "c7"), ("+I", 5, 1, "e"),
           ("-D", 5, 1, "e"), ("+I", 5, 9, "e9")]
AFTER_2 = [(1, 2, "a2"), (2, 5, "b5"), (3, 7, "c7"), (5, 9, "e9")]


@pytest.mark.spark
def test_changelog_batches_upsert_and_delete_by_key(spark, db):
    from streamsql.runtime.jdbc import write_changelog_batch

    url, connection = db
    connection.execute("CREATE TABLE kv (k bigint PRIMARY KEY, v bigint, name text)")
    kv = table(jdbc_ddl("kv", url, key="k"))
    write_changelog_batch(changelog(spark, BATCH_1), kv, "job", 0)
    assert rows_of(connection, "SELECT * FROM kv") == [(1, 2, "a2"), (2, 1, "b"), (4, 1, "d")]
    write_changelog_batch(changelog(spark, BATCH_2), kv, "job", 1)
    assert rows_of(connection, "SELECT * FROM kv") == AFTER_2


@pytest.mark.spark
def test_replayed_micro_batches_change_nothing(spark, db):
    """Batch 0 inserts k=4 and batch 1 deletes it: replaying batch 0 must not bring it back
    (nor set k=1 back to 2, k=2 back to 1), whatever the shuffle partitions are now."""
    from streamsql.runtime.jdbc import write_changelog_batch

    url, connection = db
    connection.execute("CREATE TABLE kv (k bigint PRIMARY KEY, v bigint, name text)")
    kv = table(jdbc_ddl("kv", url, key="k"))
    write_changelog_batch(changelog(spark, BATCH_1), kv, "job", 0)
    write_changelog_batch(changelog(spark, BATCH_2), kv, "job", 1)
    spark.conf.set("spark.sql.shuffle.partitions", "5")
    try:
        write_changelog_batch(changelog(spark, BATCH_1), kv, "job", 0)
        assert rows_of(connection, "SELECT * FROM kv") == AFTER_2  # k=4 not back, k=1 and k=2 not reverted
        assert write_changelog_batch(changelog(spark, BATCH_2), kv, "job", 1)["written"] == 0
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")
    assert rows_of(connection, "SELECT * FROM kv") == AFTER_2
    # another job writing the same batch ids is not mistaken for this one
    write_changelog_batch(changelog(spark, [("+I", 4, 4, "x")]), kv, "other-job", 0)
    assert (4, 4, "x") in rows_of(connection, "SELECT * FROM kv")


@pytest.mark.spark
def test_a_batch_that_failed_half_way_applies_only_its_missing_partitions(spark, db):
    """Without a key (so a double insert would show): one partition fails, the others commit;
    the replay writes only the failed partition's rows."""
    from streamsql.runtime.jdbc import write_changelog_batch

    url, connection = db
    connection.execute("CREATE TABLE log (k bigint, v bigint CHECK (v < 100), name text)")
    log = table(jdbc_ddl("log", url, extra=", 'sink.parallelism' = '4'"))
    rows = [("+I", i, 100 if i == 7 else i, f"r{i}") for i in range(20)]
    with pytest.raises(Exception, match="violates check constraint"):
        write_changelog_batch(changelog(spark, rows), log, "job", 0)
    written = rows_of(connection, "SELECT k FROM log")
    assert 0 < len(written) < 20  # the other partitions committed
    connection.execute("ALTER TABLE log DROP CONSTRAINT log_v_check")
    counts = write_changelog_batch(changelog(spark, rows), log, "job", 0)
    assert counts["written"] >= 1 and counts["skipped"] >= 1 and counts["written"] + counts["skipped"] <= 4
    assert rows_of(connection, "SELECT k FROM log") == [(i,) for i in range(20)]
    assert write_changelog_batch(changelog(spark, rows), log, "job", 0)["written"] == 0
    assert len(rows_of(connection, "SELECT k FROM log")) == 20


@pytest.mark.spark
def test_updates_into_a_table_without_a_key_are_refused(spark, db):
    from streamsql.runtime.jdbc import write_changelog_batch

    url, connection = db
    connection.execute("CREATE TABLE log (k bigint, v bigint, name text)")
    with pytest.raises(Exception, match="has no PRIMARY KEY, so it takes inserts only"):
        write_changelog_batch(changelog(spark, BATCH_1), table(jdbc_ddl("log", url)), "job", 0)
    assert rows_of(connection, "SELECT * FROM log") == []


@pytest.mark.spark
def test_missing_table_and_key_index_are_named(spark, db):
    from streamsql.runtime.jdbc import write_changelog_batch

    url, connection = db
    frame = changelog(spark, BATCH_1)
    with pytest.raises(ConnectorError, match="no such table in PostgreSQL"):
        write_changelog_batch(frame, table(jdbc_ddl("kv", url, key="k")), "job", 0)
    connection.execute("CREATE TABLE kv (k bigint, v bigint, name text)")
    with pytest.raises(ConnectorError, match="no primary key or unique index on \\(k\\)"):
        write_changelog_batch(frame, table(jdbc_ddl("kv", url, key="k")), "job", 0)


SOURCE = "1,alpha,10,2026-01-01 00:00:01.500\n2,beta,20,2026-01-01 00:00:02\n3,,30,2026-01-01 00:00:03.250\n"


@pytest.mark.spark
def test_streaming_insert_into_jdbc_is_exactly_once_across_reruns(run, tmp_path, db):
    import datetime

    url, connection = db
    connection.execute('CREATE TABLE totals (id bigint, "Name" text, amount int, ts timestamp(3))')
    write(tmp_path / "in" / "a.csv", SOURCE)
    script = (
        f"CREATE TABLE IF NOT EXISTS src (id BIGINT, name STRING, amount INT, ts TIMESTAMP(3)) WITH ("
        f"'connector' = 'filesystem', 'path' = '{tmp_path / 'in'}', 'format' = 'csv');\n"
        + jdbc_ddl("totals", url, "id BIGINT, name STRING, amount INT, ts TIMESTAMP(3)").replace(
            "CREATE TABLE", "CREATE TABLE IF NOT EXISTS") + ";\n"
        "INSERT INTO totals SELECT id, UPPER(name), amount * 2, ts FROM src WHERE amount > 10;\n"
    )
    run.output(script)
    expected = [(2, "BETA", 40, datetime.datetime(2026, 1, 1, 0, 0, 2)),
                (3, None, 60, datetime.datetime(2026, 1, 1, 0, 0, 3, 250000))]
    assert rows_of(connection, "SELECT * FROM totals") == expected
    run.output(script)  # nothing new to read: nothing written again
    assert rows_of(connection, "SELECT * FROM totals") == expected
    # a crash after the sink wrote batch 0 but before Spark's checkpoint recorded it: Spark
    # replays batch 0 (same input) on restart, and the sink must not write it again
    (spark_commit,) = (run.catalog_dir / "_checkpoints").glob("insert-into-totals-*/checkpoint/commits/0")
    spark_commit.unlink()
    (spark_commit.parent / ".0.crc").unlink(missing_ok=True)
    run.output(script)
    assert spark_commit.exists()  # batch 0 did run again
    assert rows_of(connection, "SELECT * FROM totals") == expected
    write(tmp_path / "in" / "b.csv", "4,delta,40,2026-01-01 00:00:04\n")
    run.output(script)
    assert rows_of(connection, "SELECT * FROM totals") == [*expected, (4, "DELTA", 80, datetime.datetime(2026, 1, 1, 0, 0, 4))]
    jobs = {row[0] for row in connection.execute("SELECT job FROM streamsql_commits")}
    assert len(jobs) == 1 and re.fullmatch(r"insert-into-totals-\w{12}/[0-9a-f-]{36} -> public\.totals", jobs.pop())


@pytest.mark.spark
@pytest.mark.parametrize("updating", [False, True], ids=["append", "upsert"])
def test_a_jdbc_sink_repointed_at_another_table_is_a_new_job(run, tmp_path, db, updating):
    """CREATE OR REPLACE TABLE sink ... 'table-name' = 'xb' over the same input: the new
    table gets every row (it is another job: its own checkpoint and commit records), and
    the old one keeps what it had; pointed back, the old job resumes with nothing to add."""
    url, connection = db
    for name in ("t", "xb"):
        connection.execute(f"CREATE TABLE {name} (k bigint PRIMARY KEY, n bigint)")
    write(tmp_path / "in" / "a.csv", "".join(f"{i % 7},{i}\n" for i in range(50)))
    source = (f"CREATE TABLE IF NOT EXISTS src (k BIGINT, v BIGINT) WITH ('connector' = 'filesystem',"
              f" 'path' = '{tmp_path / 'in'}', 'format' = 'csv');\n")
    query = ("INSERT INTO sink SELECT k, COUNT(*) FROM src GROUP BY k;\n" if updating
             else "INSERT INTO sink SELECT k, v FROM src WHERE k = v;\n")
    bounded = "SET 'execution.bounded-input' = 'stream';\n" if updating else ""

    def script(target: str) -> str:
        return (bounded + source + jdbc_ddl("sink", url, "k BIGINT, n BIGINT", key="k", extra="").replace(
            "'table-name' = 'sink'", f"'table-name' = '{target}'").replace("CREATE TABLE", "CREATE OR REPLACE TABLE")
            + ";\n" + query)

    expected = [(k, 50 // 7 + (k < 50 % 7)) for k in range(7)] if updating else [(k, k) for k in range(7)]
    run.output(script("t"))
    assert rows_of(connection, "SELECT * FROM t") == expected
    run.output(script("xb"))
    assert rows_of(connection, "SELECT * FROM xb") == expected
    assert rows_of(connection, "SELECT * FROM t") == expected
    connection.execute("DELETE FROM xb")
    run.output(script("t"))  # the first job again: nothing new to read, nothing written
    assert rows_of(connection, "SELECT * FROM xb") == [] and rows_of(connection, "SELECT * FROM t") == expected
    states = {p.name for p in (run.catalog_dir / "_checkpoints").iterdir()}
    assert len(states) == 2 and all(s.startswith("insert-into-sink-") for s in states)


@pytest.mark.spark
def test_a_source_repointed_at_other_data_is_refused(run, tmp_path, db):
    from streamsql.errors import JobStateError

    url, connection = db
    connection.execute("CREATE TABLE copied (k bigint, n bigint)")
    write(tmp_path / "in" / "a.csv", "1,1\n2,2\n")
    write(tmp_path / "other" / "a.csv", "3,3\n")

    def script(directory: str) -> str:
        return (f"CREATE OR REPLACE TABLE src (k BIGINT, v BIGINT) WITH ('connector' = 'filesystem',"
                f" 'path' = '{tmp_path / directory}', 'format' = 'csv');\n"
                + jdbc_ddl("copied", url, "k BIGINT, n BIGINT").replace("CREATE TABLE", "CREATE OR REPLACE TABLE")
                + ";\nINSERT INTO copied SELECT k, v FROM src;\n")

    run.output(script("in"))
    with pytest.raises(JobStateError) as error:
        run.output(script("other"))
    assert f"'path' was '{tmp_path / 'in'}' and is now '{tmp_path / 'other'}'" in error.value.message
    assert rows_of(connection, "SELECT * FROM copied") == [(1, 1), (2, 2)]
    run.output(script("other").replace("INSERT INTO", "SET 'pipeline.name' = 'copy-other';\nINSERT INTO"))
    assert rows_of(connection, "SELECT * FROM copied") == [(1, 1), (2, 2), (3, 3)]


TYPED = "id BIGINT, s STRING, e STRING, d DECIMAL(10, 2), dt DATE, ts TIMESTAMP(3), b BOOLEAN, f DOUBLE"
TYPED_SELECT = ("SELECT '+I' AS __rowkind, 1L AS id, 'x,\"y\"\\nz' AS s, '' AS e, 12.50BD AS d, DATE'2026-01-02' AS dt,"
                " TIMESTAMP'2026-01-01 00:00:01.5' AS ts, true AS b, 1.5D AS f"
                " UNION ALL SELECT '+I', 2L, NULL, NULL, NULL, NULL, NULL, NULL, NULL")


@pytest.mark.spark
@pytest.mark.parametrize("array", [False, True], ids=["copy", "executemany"])
def test_values_round_trip(spark, db, array):
    import datetime
    from decimal import Decimal

    from streamsql.runtime.jdbc import write_changelog_batch

    url, connection = db
    connection.execute("CREATE TABLE typed (id bigint PRIMARY KEY, s text, e text, d numeric(10, 2), dt date,"
                       " ts timestamp(3), b boolean, f double precision" + (", a int[])" if array else ")"))
    schema = TYPED + (", a ARRAY<INT>" if array else "")
    frame = spark.sql(TYPED_SELECT.replace("1.5D AS f", "1.5D AS f, array(1, 2) AS a") + ", NULL" if array else TYPED_SELECT)
    write_changelog_batch(frame, table(jdbc_ddl("typed", url, schema, key="id")), "job", 0)
    first = (1, 'x,"y"\nz', "", Decimal("12.50"), datetime.date(2026, 1, 2), datetime.datetime(2026, 1, 1, 0, 0, 1, 500000),
             True, 1.5) + (([1, 2],) if array else ())
    assert rows_of(connection, "SELECT * FROM typed") == [first, (2,) + (None,) * (8 if array else 7)]


@pytest.mark.spark
def test_jdbc_failures_are_one_clear_error(run, tmp_path, db):
    url, connection = db
    write(tmp_path / "in" / "a.csv", SOURCE)
    script = (
        f"CREATE TEMPORARY TABLE src (id BIGINT, name STRING, amount INT, ts TIMESTAMP(3)) WITH ("
        f"'connector' = 'filesystem', 'path' = '{tmp_path / 'in'}', 'format' = 'csv');\n"
        + jdbc_ddl("small", url, "id BIGINT").replace("CREATE TABLE", "CREATE TEMPORARY TABLE") + ";\n"
        "INSERT INTO small SELECT id FROM src;\n"
    )
    with pytest.raises(ConnectorError, match="jdbc table 'small' \\(small\\): no such table in PostgreSQL"):
        run.output(script)
    connection.execute("CREATE TABLE small (id bigint CHECK (id < 3))")
    with pytest.raises(ExecutionError, match="jdbc table 'small' \\(small\\): .*violates check constraint"):
        run.output(script)


@pytest.mark.spark
def test_batch_mode_and_bounded_windows_into_jdbc(run, tmp_path, db):
    """Batch mode appends each run (Flink's batch semantics) and cannot overwrite; a bounded
    windowed query upserts its windows by key, so a rerun leaves the same table."""
    import datetime

    from streamsql.errors import ValidationError

    url, connection = db
    connection.execute("CREATE TABLE per_window (w timestamp, n bigint, PRIMARY KEY (w))")
    connection.execute("CREATE TABLE copied (id bigint, amount int)")
    write(tmp_path / "in" / "a.csv", SOURCE)
    ddl = (
        f"CREATE TABLE IF NOT EXISTS src (id BIGINT, name STRING, amount INT, ts TIMESTAMP(3),"
        f" WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ("
        f"'connector' = 'filesystem', 'path' = '{tmp_path / 'in'}', 'format' = 'csv');\n"
        + jdbc_ddl("per_window", url, "w TIMESTAMP(3), n BIGINT", key="w").replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS") + ";\n"
        + jdbc_ddl("copied", url, "id BIGINT, amount INT").replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS") + ";\n"
    )
    windows = ("INSERT INTO per_window SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts),"
               " INTERVAL '2' SECOND)) GROUP BY window_start, window_end;\n")
    for _ in range(2):
        run.output(ddl + windows)
        assert rows_of(connection, "SELECT * FROM per_window") == [
            (datetime.datetime(2026, 1, 1, 0, 0), 1), (datetime.datetime(2026, 1, 1, 0, 0, 2), 2)]
    # No key: a rerun writes nothing again; new input that changes a written window is refused.
    connection.execute("CREATE TABLE window_log (w timestamp, n bigint)")
    log_ddl = jdbc_ddl("window_log", url, "w TIMESTAMP(3), n BIGINT").replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS")
    logged = windows.replace("per_window", "window_log")
    for _ in range(2):
        run.output(ddl + log_ddl + ";\n" + logged)
        assert rows_of(connection, "SELECT * FROM window_log") == [
            (datetime.datetime(2026, 1, 1, 0, 0), 1), (datetime.datetime(2026, 1, 1, 0, 0, 2), 2)]
    # With a key, new input that changes a window updates it in place (and adds the new one).
    write(tmp_path / "in" / "b.csv", "4,d,40,2026-01-01 00:00:03\n5,e,50,2026-01-01 00:00:04\n")
    run.output(ddl + windows)
    assert rows_of(connection, "SELECT * FROM per_window") == [
        (datetime.datetime(2026, 1, 1, 0, 0), 1), (datetime.datetime(2026, 1, 1, 0, 0, 2), 3),
        (datetime.datetime(2026, 1, 1, 0, 0, 4), 1)]
    from streamsql.errors import JobStateError

    with pytest.raises(JobStateError, match="changes rows this job already wrote"):
        run.output(ddl + log_ddl + ";\n" + logged)
    (tmp_path / "in" / "b.csv").unlink()
    batch = ddl + "SET 'execution.runtime-mode' = 'batch';\nINSERT INTO copied SELECT id, amount FROM src;\n"
    run.output(batch)
    run.output(batch)
    assert rows_of(connection, "SELECT * FROM copied") == [(1, 10), (1, 10), (2, 20), (2, 20), (3, 30), (3, 30)]
    with pytest.raises(ValidationError, match="jdbc connector does not support overwriting"):
        run.output(ddl + "SET 'execution.runtime-mode' = 'batch';\nINSERT OVERWRITE copied SELECT id, amount FROM src;\n")


@pytest.mark.spark
def test_reading_an_unreachable_database_is_one_clear_error(run):
    with pytest.raises(ConnectorError, match="jdbc table 'dim' \\(dim\\): cannot connect to jdbc:postgresql://127.0.0.1:1/db"):
        run.output("CREATE TEMPORARY TABLE dim (a INT) WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://127.0.0.1:1/db',"
                   " 'table-name' = 'dim');\nSELECT * FROM dim;\n")


@pytest.mark.spark
def test_kill_9_at_random_points_then_restart_writes_every_row_once(tmp_path, db):
    """A continuous job (one file per micro-batch) killed at random points — driver or JVM,
    mid-batch or between batches — and restarted: every row, and every window, lands in
    PostgreSQL exactly once (the tables have no key, so a double write would show)."""
    import os
    import random
    import signal

    from tests.conftest import wait_for
    from tests.jobs import all_read, BASE, FILES, kill_9, rows_csv, ROWS_PER_FILE, start

    url, connection = db
    connection.execute("CREATE TABLE dst (id bigint, k text, ts timestamp)")
    connection.execute("CREATE TABLE wdst (k text, window_start timestamp, window_end timestamp, n bigint)")
    source = tmp_path / "in"
    for f in range(FILES):  # Spark's file stream reads files in modification-time order
        path = write(source / f"part-{f:03d}.csv", rows_csv(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE))
        os.utime(path, (time.time() - 100 + f, time.time() - 100 + f))
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE src (id BIGINT, k STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s',
        'source.max-files-per-batch' = '1');
{jdbc_ddl("dst", url, "id BIGINT, k STRING, ts TIMESTAMP(3)")};
{jdbc_ddl("wdst", url, "k STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), n BIGINT")};
EXECUTE STATEMENT SET BEGIN
INSERT INTO dst SELECT id, UPPER(k), ts FROM src;
INSERT INTO wdst SELECT k, window_start, window_end, COUNT(*) FROM
  TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
END;
""")
    def count() -> int:
        return connection.execute("SELECT count(*) FROM dst").fetchone()[0]

    def kill_while_writing(job, rng, which: str) -> None:
        """Once the job has written something more, kill it within the next seconds: mid-batch
        or between batches (one file a batch)."""
        before = count()
        wait_for(lambda: count() > before or job.poll() is not None, 120)
        time.sleep(rng.uniform(0, 3))
        kill_9(job, which)

    rng = random.Random(int(os.environ.get("STREAMSQL_TEST_SEED", "7")))
    for attempt in range(int(os.environ.get("STREAMSQL_TEST_KILLS", "3"))):
        kill_while_writing(start(tmp_path, script), rng, "jvm" if attempt % 2 else "driver")
        for name in ("dst", "wdst"):  # whatever is in PostgreSQL is there once
            assert connection.execute(f"SELECT count(*) = count(DISTINCT t) FROM {name} t").fetchone()[0]
    job = start(tmp_path, script)
    try:
        assert wait_for(lambda: all_read(tmp_path) or job.poll() is not None, 480)
        assert job.poll() is None, job.stderr.read()
        os.kill(job.pid, signal.SIGUSR1)  # drain: every window fires, then the job ends
        assert job.wait(240) == 0, job.stderr.read()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    total = FILES * ROWS_PER_FILE
    assert rows_of(connection, "SELECT * FROM dst") == sorted(
        (i, "ab"[i % 2].upper(), BASE + timedelta(seconds=i)) for i in range(total))
    assert rows_of(connection, "SELECT * FROM wdst") == sorted(
        (k, BASE + timedelta(seconds=w), BASE + timedelta(seconds=w + 10), 5) for w in range(0, total, 10) for k in "ab")


@pytest.mark.spark
def test_kill_9_of_stateful_operators_then_restart_gives_the_uninterrupted_tables(tmp_path, db):
    """A continuous job with a Top-N (Rank) and an aggregate of an aggregate (two chained
    GroupAggregates), upserted into PostgreSQL by key, killed with kill -9 at random points
    and restarted: the operators' state comes back from the checkpoint, and the tables end as
    the same queries computed over all the input at once."""
    import os
    import random
    import signal
    from collections import Counter

    from tests.conftest import wait_for
    from tests.jobs import all_read, FILES, finish, kill_9, reap, ROWS_PER_FILE, start

    url, connection = db
    connection.execute("CREATE TABLE top2 (k text, v bigint, rn bigint, PRIMARY KEY (k, rn))")
    connection.execute("CREATE TABLE spread (n bigint PRIMARY KEY, keys bigint)")
    rng = random.Random(11)
    values = rng.sample(range(100_000), FILES * ROWS_PER_FILE)  # no ties
    keys = [f"k{rng.randint(0, 9)}" for _ in values]
    source = tmp_path / "in"
    for f in range(FILES):  # Spark's file stream reads files in modification-time order
        rows = range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)
        path = write(source / f"part-{f:03d}.csv", "".join(f"{keys[i]},{values[i]}\n" for i in rows))
        os.utime(path, (time.time() - 100 + f, time.time() - 100 + f))
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE src (k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv',
  'source.monitor-interval' = '1s', 'source.max-files-per-batch' = '1');
{jdbc_ddl("top2", url, "k STRING, v BIGINT, rn BIGINT", key="k, rn")};
{jdbc_ddl("spread", url, "n BIGINT, keys BIGINT", key="n")};
EXECUTE STATEMENT SET BEGIN
INSERT INTO top2 SELECT k, v, rn FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn
  FROM src) WHERE rn <= 2;
INSERT INTO spread SELECT n, COUNT(*) FROM (SELECT k, COUNT(*) AS n FROM src GROUP BY k) GROUP BY n;
END;
""")

    def committed() -> int:
        return connection.execute("SELECT count(*) FROM streamsql_commits").fetchone()[0] if connection.execute(
            "SELECT to_regclass('streamsql_commits') IS NOT NULL").fetchone()[0] else 0

    for attempt in range(int(os.environ.get("STREAMSQL_TEST_KILLS", "3"))):
        job = start(tmp_path, script)
        before = committed()
        wait_for(lambda: committed() > before or job.poll() is not None, 180)
        time.sleep(rng.uniform(0, 3))
        kill_9(job, "jvm" if attempt % 2 else "driver")
    job = start(tmp_path, script)
    try:
        assert wait_for(lambda: all_read(tmp_path) or job.poll() is not None, 480)
        finish(job, signal.SIGTERM)
    finally:
        reap(job)
    by_key: dict[str, list[int]] = {}
    for k, v in zip(keys, values):
        by_key.setdefault(k, []).append(v)
    expected_top = sorted((k, v, i + 1) for k, vs in by_key.items() for i, v in enumerate(sorted(vs, reverse=True)[:2]))
    assert rows_of(connection, "SELECT * FROM top2") == expected_top
    counts = Counter(len(vs) for vs in by_key.values())
    assert rows_of(connection, "SELECT * FROM spread") == sorted(counts.items())


@pytest.mark.spark
def test_outer_join_over_unbounded_input_retracts_into_postgres_across_kill_9(run, tmp_path, db):
    """A continuous LEFT JOIN of two watched directories, upserted into PostgreSQL: rows
    without a partner are written null-padded while the job runs, a kill -9 and a restart
    resume from the checkpoint, and partners arriving later replace the padded rows; the
    table ends as the join computed over all the input at once."""
    import os
    import signal

    from tests.conftest import wait_for
    from tests.jobs import finish, kill_9, reap, start

    url, connection = db
    connection.execute("CREATE TABLE joined (id bigint PRIMARY KEY, v bigint, name text)")
    facts, dims = tmp_path / "facts", tmp_path / "dims"

    def part(folder, n, text):
        os.utime(write(folder / f"part-{n}.csv", text), (time.time() - 100 + n,) * 2)

    part(facts, 0, "".join(f"{i},k{i % 5},{i * 3}\n" for i in range(20)))
    part(dims, 0, "k0,zero\nk1,one\n")
    watched = "'format' = 'csv', 'source.monitor-interval' = '1s'"
    ddl = f"""
CREATE TABLE facts (id BIGINT, k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{facts}', {watched});
CREATE TABLE dims (k STRING, name STRING) WITH ('connector' = 'filesystem', 'path' = '{dims}', {watched});
{jdbc_ddl("joined", url, "id BIGINT, v BIGINT, name STRING", key="id")};
"""
    # (no upsert key: Flink 2.3 asks how rows under one id resolve; the padded row's -D and the
    # joined row's +I pass the sink upsert materializer, its rows in the checkpoint)
    query = ("INSERT INTO joined SELECT f.id, f.v, d.name FROM facts f LEFT JOIN dims d ON f.k = d.k"
             " ON CONFLICT DO DEDUPLICATE")
    script = write(tmp_path / "job.sql", ddl + query + ";")

    def names() -> dict:
        return dict(connection.execute("SELECT id, name FROM joined").fetchall())

    job = start(tmp_path, script)
    try:
        assert wait_for(lambda: len(names()) == 20 or job.poll() is not None, 240), "no output before the input ended"
        assert job.poll() is None, job.stderr.read()
        assert names()[2] is None and names()[1] == "one"  # k2 has no partner yet: null-padded
        kill_9(job, "driver")
        part(dims, 1, "k2,two\nk3,three\n")
        part(facts, 1, "".join(f"{i},k{i % 5},{i * 3}\n" for i in range(20, 30)))
        job = start(tmp_path, script)
        assert wait_for(lambda: (len(names()) == 30 and names()[2] == "two") or job.poll() is not None, 240)
        finish(job, signal.SIGTERM)
    finally:
        reap(job)
    dim_names = {"k0": "zero", "k1": "one", "k2": "two", "k3": "three"}
    expected = sorted((i, i * 3, dim_names.get(f"k{i % 5}")) for i in range(30))
    assert rows_of(connection, "SELECT * FROM joined") == expected
