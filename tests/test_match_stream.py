"""MATCH_RECOGNIZE's streaming operator (spark.match_stream) on Spark Structured Streaming:
rows buffered until the watermark passes them, matches emitted once no later row can change
them, late rows dropped, state kept across runs of the query on its checkpoint."""

from __future__ import annotations

from streamsql.catalog import Catalog
from streamsql.dialect.script import parse_script
from streamsql.plan.planner import Planner
from tests.conftest import write

V_SHAPE = """
CREATE TEMPORARY TABLE ticks (symbol STRING, price INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', 'source.monitor-interval' = '1 s');
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.price) AS top, LAST(B.price) AS bottom, C.price AS up
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C)
  DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price)
) AS v;
"""


def test_matches_are_emitted_once_the_watermark_decides_them(spark, tmp_path):
    from streamsql.spark.match_stream import match_stream

    folder = tmp_path / "ticks"
    folder.mkdir()
    planner = Planner(Catalog(None), base_dir=tmp_path)
    step = [planner.plan(s) for s in parse_script(V_SHAPE.format(path=folder))][-1]
    relation = next(iter(step.plan.derived.values()))

    def run_once(name: str, text: str) -> list[tuple]:
        write(folder / name, text)
        frame = (spark.readStream.schema("symbol STRING, price INT, ts TIMESTAMP").csv(str(folder))
                 .withWatermark("ts", "1 second"))
        emitted = []
        query = (match_stream(frame, relation).writeStream.outputMode("append").trigger(availableNow=True)
                 .foreachBatch(lambda batch, _: emitted.extend(tuple(r) for r in batch.collect()))
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
        query.awaitTermination()
        return sorted(emitted)

    # 12 17 13 11 15 (ACME, 10:00:00-04), BETA 5 4 (10:00:00-01). The watermark reaches 10:00:03:
    # from 17 the search for B+ reaches the last row before the watermark: not decided yet.
    assert run_once("part-0.csv", "ACME,12,2026-01-01 10:00:00\nACME,17,2026-01-01 10:00:01\n"
                    "ACME,13,2026-01-01 10:00:02\nACME,11,2026-01-01 10:00:03\nACME,15,2026-01-01 10:00:04\n"
                    "BETA,5,2026-01-01 10:00:00\nBETA,4,2026-01-01 10:00:01\n") == []
    # Later rows move the watermark to 10:00:09: ACME's V (17, 11, 15) is decided; BETA's
    # 6 at 10:00:02 was late on arrival (dropped), so BETA's V waits for 7 at 10:00:05.
    assert run_once("part-1.csv", "ACME,14,2026-01-01 10:00:10\nBETA,6,2026-01-01 10:00:02\n"
                    "BETA,7,2026-01-01 10:00:05\nBETA,1,2026-01-01 10:00:11\n") == [
        ("ACME", 17, 11, 15), ("BETA", 5, 4, 7)]
