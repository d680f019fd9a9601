"""Outer interval joins (both rowtimes bounded against each other) stream on Spark's own
stream-stream join, which keeps rows until the watermark passes their bounds and pads a
row without a partner once, then: insert-only, as Flink's interval join. Over bounded
input the default run computes them as one batch (Spark's run to the end never passes the
last bounds); streamed ('execution.bounded-input' = 'stream') the end of input does."""

from __future__ import annotations

import os
import random
import time

import pytest

from streamsql.spark.physical import needs_stateful_operator, pads_as_time_passes
from tests.conftest import write
from tests.operator_plans import build
from tests.streamed import streamed_and_batch

ON = "ON a.id = b.auction AND b.ts BETWEEN a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL '10' SECOND"


@pytest.mark.parametrize("side", ["LEFT", "RIGHT", "FULL"])
def test_outer_interval_joins_are_spark_s_own(side):
    root = build(f"SELECT a.id, b.price FROM auction a {side} JOIN bid b {ON};")
    assert needs_stateful_operator(root) is None and pads_as_time_passes(root)
    inner = build(f"SELECT a.id, b.price FROM auction a JOIN bid b {ON};")
    assert not pads_as_time_passes(inner)
    # over an aggregate's changelog an interval join is not one Spark streams
    over_counts = build("SELECT a.id, b.n FROM auction a LEFT JOIN (SELECT auction, COUNT(*) AS n, MAX(ts) AS ts"
                        " FROM bid GROUP BY auction) b ON a.id = b.auction AND b.ts BETWEEN a.ts AND a.ts"
                        " + INTERVAL '1' SECOND;")
    assert needs_stateful_operator(over_counts) is not None


@pytest.mark.spark
def test_streamed_outer_interval_joins_end_with_the_batch_result(run, tmp_path):
    rng = random.Random(5)
    for table, width in (("t", 10), ("d", 6)):
        for i in range(4):  # Spark's file stream reads files by modification time
            rows = "".join(f"k{rng.randint(0, 4)},{rng.randint(0, 999) if table == 't' else f'n{i}{j}'},"
                           f"2026-01-01 00:{i * 2 + j * 2 // width:02d}:{rng.randint(0, 59):02d}\n"
                           for j in range(width))
            os.utime(write(tmp_path / table / f"part-{i}.csv", rows), (time.time() - 100 + i,) * 2)
    run.output(f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL"
               f" '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 't'}', 'format' = 'csv');"
               f"CREATE TEMPORARY TABLE d (k STRING, name STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL"
               f" '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'd'}', 'format' = 'csv');")
    for side in ("LEFT", "RIGHT", "FULL"):
        query = (f"SELECT t.k, t.v, d.name FROM t {side} JOIN d ON t.k = d.k AND t.ts BETWEEN d.ts - INTERVAL"
                 f" '30' SECOND AND d.ts + INTERVAL '10' SECOND")
        final, ops, expected = streamed_and_batch(run, query)
        assert final == expected, side
        assert set(ops) == {"+I"}, side  # padded once, never retracted
        padded = sum(1 for row in expected if "" in row)
        assert padded and len(expected) - padded, f"{side}: the data must pad rows and join rows"
        # the default run over bounded input (one batch: it pads the rows whose bounds the
        # last micro-batch never passes)
        default = sorted(tuple(r.split(",")) for r in run.output(query + ";").splitlines()[1:])
        assert default == expected, side
