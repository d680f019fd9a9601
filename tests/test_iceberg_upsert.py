"""An updating query into an Iceberg table with a PRIMARY KEY (runtime.iceberg.upsert): each
key's last change applied copy-on-write in one snapshot, exactly once; read back with
pyiceberg and compared with the final table computed here in plain Python, on random data."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pytest

from streamsql.catalog import Catalog
from streamsql.changelog import UPDATE_AFTER
from streamsql.dialect.script import parse_script
from streamsql.errors import ValidationError
from streamsql.plan.changelog_checks import accepted_kinds, check_sink
from streamsql.plan.logical import build_operator_plan
from streamsql.plan.planner import Planner
from streamsql.runtime.sources import is_bounded
from tests.conftest import write
from tests.test_iceberg import catalog_of, iceberg_ddl, table


def test_an_updating_query_into_iceberg_without_a_key_is_refused_at_plan_time(tmp_path):
    write(tmp_path / "in" / "a.csv", "a\n")
    ddl = (f"CREATE TEMPORARY TABLE src (k STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'in'}',"
           " 'format' = 'csv');\n" + iceberg_ddl("counts", tmp_path / "lake", "k STRING, n BIGINT") + ";\n")
    planner = Planner(Catalog(None), base_dir=tmp_path)
    step = [planner.plan(s) for s in parse_script(ddl + "INSERT INTO counts SELECT k, COUNT(*) FROM src GROUP BY k;")][-1]
    with pytest.raises(ValidationError) as caught:
        check_sink(build_operator_plan(step.plan, is_bounded), step.table)
    assert caught.value.message == (
        "Table sink 'default_catalog.default_database.counts' doesn't support consuming update changes"
        " which is produced by node GroupAggregate(groupBy=[k], select=[k, COUNT(*) AS EXPR$1])")
    keyed = table(iceberg_ddl("counts", tmp_path / "lake", "k STRING, n BIGINT, PRIMARY KEY (k) NOT ENFORCED"))
    assert UPDATE_AFTER in accepted_kinds(keyed) and UPDATE_AFTER not in accepted_kinds(step.table)


def test_the_sink_creates_a_keyed_table_with_the_key_as_identifier_fields(tmp_path):
    from streamsql.runtime.iceberg.sink import resolve

    keyed = table(iceberg_ddl("t", tmp_path / "lake", "a INT, b STRING, v DOUBLE, PRIMARY KEY (b, a) NOT ENFORCED"))
    created, _ = resolve(keyed)
    schema = catalog_of(tmp_path / "lake").load_table(("db", "t")).schema()
    assert [schema.find_field(i).name for i in schema.identifier_field_ids] == ["b", "a"]
    assert [(f.name, f.required) for f in schema.fields] == [("a", True), ("b", True), ("v", False)]
    resolve(table(iceberg_ddl("plain", tmp_path / "lake", "a INT")))
    assert catalog_of(tmp_path / "lake").load_table(("db", "plain")).schema().identifier_field_ids == []


def test_the_executors_functions_without_spark(tmp_path):
    """ChangeWriter (the new rows' files and the batch's keys, deletes' too) and Rewriter (a
    file without the keys' rows) over a pyiceberg table, a composite key; committed as the sink does."""
    import pickle

    from streamsql.runtime.iceberg.sink import _io_properties, _writer_metadata
    from streamsql.runtime.iceberg.upsert import ChangeWriter, Rewriter, _ipc

    lake = tmp_path / "lake"
    lake.mkdir()
    created = catalog_of(lake)
    created.create_namespace("db")
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string(), nullable=False), ("v", pa.int64())])
    loaded = created.create_table(("db", "t"), schema=schema)
    rng = random.Random(2)
    old = {(a, b): rng.randrange(1000) for a in range(20) for b in "xyz"}
    loaded.append(pa.Table.from_pylist([{"a": a, "b": b, "v": v} for (a, b), v in old.items()], schema=schema))
    changes = [("+U", 3, "x", 1), ("-D", 4, "y", None), ("+I", 99, "z", 2), ("-D", 98, "x", None)]
    batch = pa.record_batch({"__rowkind": [c[0] for c in changes], "a": [c[1] for c in changes],
                             "b": [c[2] for c in changes], "v": [c[3] for c in changes]})
    metadata, io = _writer_metadata(loaded), _io_properties(loaded)
    (out,) = list(ChangeWriter(metadata, io, "Table 't'", ("a", "b"))(iter([batch])))
    out = out.to_pylist()
    files = [pickle.loads(r["file"]) for r in out if r["file"] is not None]
    (keys,) = [pa.ipc.open_stream(r["keys"]).read_all() for r in out if r["keys"] is not None]
    assert sum(f.record_count for f in files) == 2 and keys.num_rows == 4
    tasks = pa.record_batch({"task": [pickle.dumps(t) for t in loaded.scan().plan_files()]})
    (rewritten,) = list(Rewriter(metadata, io, _ipc(keys))(iter([tasks])))
    (result,) = rewritten.to_pylist()
    assert result["removed"] == 2
    with loaded.transaction() as transaction:
        with transaction.update_snapshot(snapshot_properties={"streamsql.batch-id": "0"}).overwrite() as snapshot:
            snapshot.delete_data_file(pickle.loads(result["original"]))
            for data_file in [*pickle.loads(result["files"]), *files]:
                snapshot.append_data_file(data_file)
    expected = {**old, (3, "x"): 1, (99, "z"): 2}
    del expected[(4, "y")]
    got = {(r["a"], r["b"]): r["v"] for r in catalog_of(lake).load_table(("db", "t")).scan().to_arrow().to_pylist()}
    assert got == expected
    nulls = pa.record_batch({"__rowkind": ["+I"], "a": pa.array([None], pa.int64()), "b": ["x"], "v": [1]})
    with pytest.raises(RuntimeError, match="Table 't': the query produced a NULL in PRIMARY KEY column 'a'"):
        list(ChangeWriter(metadata, io, "Table 't'", ("a", "b"))(iter([nulls])))


def words(rng: random.Random, n: int, keys: int) -> list[str]:
    return [f"w{rng.randrange(keys)}" for _ in range(n)]


def read(lake, name: str, key: str) -> list[dict]:
    rows = catalog_of(lake).load_table(("db", name)).scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: r[key])


def src_ddl(path, extra: str = "") -> str:
    return (f"CREATE TABLE IF NOT EXISTS src (k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{path}',"
            f" 'format' = 'csv'{extra});\n")


def csv(rng: random.Random, n: int, keys: int) -> tuple[str, list[tuple[str, int]]]:
    rows = [(k, rng.randrange(100)) for k in words(rng, n, keys)]
    return "".join(f"{k},{v}\n" for k, v in rows), rows


def totals(rows) -> list[dict]:
    counts, sums = Counter(k for k, _ in rows), Counter()
    for k, v in rows:
        sums[k] += v
    return sorted(({"k": k, "n": counts[k], "total": sums[k]} for k in counts), key=lambda r: r["k"])


KEYED = "k STRING, n BIGINT, total BIGINT, PRIMARY KEY (k) NOT ENFORCED"
GROUP_BY = "INSERT INTO dst SELECT k, COUNT(*), SUM(v) FROM src GROUP BY k;\n"


@pytest.mark.spark
def test_a_batch_mode_group_by_upserts_by_key_across_runs(run, tmp_path):
    """Batch mode: each run writes its final table by key; rows of other keys stay."""
    rng, lake = random.Random(11), tmp_path / "lake"
    text, rows = csv(rng, 300, 40)
    write(tmp_path / "in" / "1.csv", text)
    script = "SET 'execution.runtime-mode' = 'batch';\n" + src_ddl(tmp_path / "in") + iceberg_ddl("dst", lake, KEYED) + ";\n" + GROUP_BY
    run.output(script)
    assert read(lake, "dst", "k") == totals(rows)
    other = {"k": "zz-other", "n": 7, "total": 7}
    loaded = catalog_of(lake).load_table(("db", "dst"))
    loaded.append(pa.Table.from_pylist([other], schema=loaded.schema().as_arrow()))
    more, added = csv(rng, 200, 60)
    write(tmp_path / "in" / "2.csv", more)
    run.output(script)
    assert read(lake, "dst", "k") == sorted([*totals(rows + added), other], key=lambda r: r["k"])


UPDATING = "INSERT INTO dst SELECT n, COUNT(*) FROM (SELECT k, COUNT(*) AS n FROM src GROUP BY k) GROUP BY n;\n"


def keys_per_count(rows) -> list[dict]:
    counts = Counter(Counter(k for k, _ in rows).values())
    return [{"n": n, "keys": counts[n]} for n in sorted(counts)]


@pytest.mark.spark
def test_an_updating_stream_upserts_and_deletes_by_key(run, tmp_path):
    """A two-level GROUP BY, streamed a file per micro-batch (its changelog has -U/+U and -D:
    a count no key has any more vanishes), on random words; after each run the table is the
    final table computed in Python; each micro-batch is one snapshot."""
    rng, lake = random.Random(5), tmp_path / "lake"
    script = ("SET 'execution.bounded-input' = 'stream';\n" + src_ddl(tmp_path / "in", ", 'source.max-files-per-batch' = '1'")
              + iceberg_ddl("dst", lake, "n BIGINT, keys BIGINT, PRIMARY KEY (n) NOT ENFORCED") + ";\n" + UPDATING)
    seen, deleted = [], False
    for f in range(4):
        for g in range(2):  # two files, two micro-batches a run
            text, rows = csv(rng, rng.randrange(5, 40), 12)
            write(tmp_path / "in" / f"{f}-{g}.csv", text)
            seen += rows
        before = {r["n"] for r in read(lake, "dst", "n")} if f else set()
        run.output(script)
        expected = keys_per_count(seen)
        assert read(lake, "dst", "n") == expected
        deleted |= bool(before - {r["n"] for r in expected})
    assert deleted  # some count did vanish: a -D applied
    snapshots = catalog_of(lake).load_table(("db", "dst")).snapshots()
    assert [int(s.summary["streamsql.batch-id"]) for s in snapshots] == list(range(8))
    assert {s.summary.operation.value for s in snapshots[1:]} == {"overwrite"}


@pytest.mark.spark
def test_a_top_n_retracts_rows_from_the_iceberg_table(run, tmp_path):
    """A Top-2 per group keyed by (grp, rn): rows leave the ranking (-D) and move within it."""
    rng, lake = random.Random(3), tmp_path / "lake"
    script = ("SET 'execution.bounded-input' = 'stream';\n"
              f"CREATE TABLE IF NOT EXISTS src (grp STRING, id BIGINT, score BIGINT) WITH ('connector' = 'filesystem',"
              f" 'path' = '{tmp_path / 'in'}', 'format' = 'csv', 'source.max-files-per-batch' = '1');\n"
              + iceberg_ddl("dst", lake, "grp STRING, id BIGINT, score BIGINT, PRIMARY KEY (grp, id) NOT ENFORCED") + ";\n"
              "INSERT INTO dst SELECT grp, id, score FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY grp ORDER BY score DESC)"
              " AS rn FROM src) WHERE rn <= 2 ON CONFLICT DO DEDUPLICATE;\n")  # no upsert key: Flink 2.3 asks
    seen, ids = [], iter(range(10_000))
    for f in range(3):
        rows = [(f"g{rng.randrange(3)}", next(ids), rng.randrange(1000)) for _ in range(rng.randrange(4, 12))]
        write(tmp_path / "in" / f"{f}.csv", "".join(f"{g},{i},{s}\n" for g, i, s in rows))
        seen += rows
        run.output(script)
        expected = []
        for grp in sorted({g for g, _, _ in seen}):
            best = sorted((r for r in seen if r[0] == grp), key=lambda r: -r[2])[:2]
            expected += [{"grp": g, "id": i, "score": s} for g, i, s in best]
        got = catalog_of(lake).load_table(("db", "dst")).scan().to_arrow().to_pylist()
        assert sorted(got, key=lambda r: (r["grp"], r["id"])) == sorted(expected, key=lambda r: (r["grp"], r["id"]))


@pytest.mark.spark
def test_a_replayed_upsert_batch_is_not_applied_twice(run, tmp_path):
    rng, lake = random.Random(9), tmp_path / "lake"
    text, rows = csv(rng, 120, 15)
    write(tmp_path / "in" / "a.csv", text)
    script = ("SET 'execution.bounded-input' = 'stream';\n" + src_ddl(tmp_path / "in")
              + iceberg_ddl("dst", lake, KEYED) + ";\n" + GROUP_BY)
    run.output(script)
    assert read(lake, "dst", "k") == totals(rows)
    snapshots = len(catalog_of(lake).load_table(("db", "dst")).snapshots())
    # a crash after the sink committed batch 0 but before Spark's checkpoint recorded it: Spark
    # replays batch 0 on restart, and the sink finds it in the snapshots and skips it
    (spark_commit,) = (run.catalog_dir / "_checkpoints").glob("insert-into-dst-*/checkpoint/commits/0")
    spark_commit.unlink()
    (spark_commit.parent / ".0.crc").unlink(missing_ok=True)
    run.output(script)
    assert spark_commit.exists()  # batch 0 did run again
    assert read(lake, "dst", "k") == totals(rows)
    assert len(catalog_of(lake).load_table(("db", "dst")).snapshots()) == snapshots  # no commit at all
    more, added = csv(rng, 50, 20)
    write(tmp_path / "in" / "b.csv", more)
    run.output(script)
    assert read(lake, "dst", "k") == totals(rows + added)


@pytest.mark.spark
def test_a_bounded_updating_job_in_streaming_mode_writes_its_final_table(run, tmp_path):
    """Streaming mode over bounded input, computed as one batch (runtime.inserts.run_bounded):
    the final table by key, in one snapshot of the job; a rerun over the same input commits nothing,
    one over more input upserts what changed."""
    rng, lake = random.Random(21), tmp_path / "lake"
    text, rows = csv(rng, 250, 30)
    write(tmp_path / "in" / "a.csv", text)
    script = src_ddl(tmp_path / "in") + iceberg_ddl("dst", lake, KEYED) + ";\n" + GROUP_BY
    run.output(script)
    assert read(lake, "dst", "k") == totals(rows)
    (snapshot,) = catalog_of(lake).load_table(("db", "dst")).snapshots()
    assert snapshot.summary["streamsql.batch-id"] == "0"
    run.output(script)
    assert len(catalog_of(lake).load_table(("db", "dst")).snapshots()) == 1
    # new input changes rows the first run wrote: the rerun upserts them (an append-only table refuses this)
    more, added = csv(rng, 80, 30)
    write(tmp_path / "in" / "b.csv", more)
    run.output(script)
    assert read(lake, "dst", "k") == totals(rows + added)
