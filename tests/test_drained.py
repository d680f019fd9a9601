"""When a drained query may stop: the progress Spark reports, read by runtime.drain.drained
(no JVM: progress as Spark's JSON gives it)."""

from __future__ import annotations

from streamsql.runtime.drain import PREFIX, drained

OWN = {"description": "FileStreamSource[file:/data/bids]", "numInputRows": 7}
SENTINEL_SOURCE = {"description": f"FileStreamSource[file:/tmp/p/{PREFIX}x1/default_database__bids]"}


class Query:
    def __init__(self, progress):
        self.lastProgress = progress


def progress(watermark=None, sources=(OWN, SENTINEL_SOURCE)):
    report = {"batchId": 4, "sources": list(sources)}
    if watermark is not None:
        report["eventTime"] = {"watermark": watermark}
    return report


def test_a_query_that_has_reported_nothing_has_not_drained():
    assert not drained(Query(None))
    assert not drained(Query({}))


def test_a_watermarked_query_drains_once_its_watermark_is_at_the_sentinel():
    assert not drained(Query(progress("2026-01-01T00:00:28.000Z")))
    assert drained(Query(progress("9999-12-31T23:59:59.999Z")))


def test_a_trigger_that_found_no_data_reports_no_watermark_and_has_not_drained():
    """Spark's progress of a trigger that ran no batch (the first of a restarted job) has no
    eventTime: stopping there lost the restored state's open windows."""
    assert not drained(Query(progress(None)))


def test_a_query_without_a_sentinel_source_waits_on_no_watermark():
    assert drained(Query(progress(None, sources=(OWN,))))
    assert drained(Query(progress("2026-01-01T00:00:28.000Z", sources=(OWN,))))
