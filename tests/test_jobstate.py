"""A job's state directory (runtime.jobstate) without Spark: what is resumed and what is refused."""

from __future__ import annotations

import json

import pytest

from streamsql.errors import JobStateError
from streamsql.plan.objects import ObjectName, TableDef
from streamsql.runtime.jobstate import STATE_LAYOUT, STREAMING, JobState


def job(tmp_path) -> JobState:
    table = TableDef(ObjectName("default_database", "totals"), [], {"connector": "jdbc"})
    return JobState.of(tmp_path / "state", "insert-into-totals", table, "f00d", STREAMING)


def saved_as(state: JobState, layout: int | None) -> None:
    """The job's record as a streamsql of ``layout`` wrote it (None: before layouts were recorded)."""
    record = json.loads((state.directory / "job.json").read_text())
    if layout is None:
        del record["state_layout"]
    else:
        record["state_layout"] = layout
    (state.directory / "job.json").write_text(json.dumps(record))


def with_operator_state(state: JobState) -> None:
    (state.directory / "checkpoint" / "state" / "0").mkdir(parents=True)


def test_a_checkpoint_with_state_in_an_older_layout_is_not_resumed(tmp_path):
    state = job(tmp_path)
    state.save()
    record = json.loads((state.directory / "job.json").read_text())
    assert record["state_layout"] == STATE_LAYOUT
    state.check()  # the same layout: resumed
    saved_as(state, None)  # as streamsql wrote it before generations
    state.check()  # no operator state yet: nothing to lose
    with_operator_state(state)
    with pytest.raises(JobStateError) as error:
        state.check()
    message = error.value.message
    assert "laid out their state another way" in message and "would start empty" in message
    assert str(state.directory) in message and "STOP JOB" in message


RETIRING = "drops once the watermark has passed it"
OVER = "OVER operator kept each bucket's history in one value"
ARGMAX = "joined a window aggregate with its own maximum per window"
TEMPORAL = "temporal join kept each bucket's versions in one value"
ORDERED = "without the rows' read order"
NATIVE = "ran on streamsql's stateful operator, which this one runs as Spark's own"


@pytest.mark.parametrize("layout, concern, words", [(4, "retiring", RETIRING), (4, "over", OVER), (5, "over", OVER),
                                                    (6, "over", OVER), (4, "argmax", ARGMAX), (7, "argmax", ARGMAX),
                                                    (4, "temporal", TEMPORAL), (8, "temporal", TEMPORAL),
                                                    (4, "ordered", ORDERED), (9, "ordered", ORDERED),
                                                    (4, "native_update", NATIVE), (10, "native_update", NATIVE)])
def test_a_job_of_an_earlier_layout_resumes_unless_an_operator_of_it_changed_its_state(tmp_path, layout, concern,
                                                                                       words):
    """Layout 4 kept a regular join's every row in an operator without event time; Spark
    refuses to switch a checkpointed operator to event time, so a job whose join now lets the
    watermark retire a side's rows is refused, in streamsql's words. Before layout 7 OVER
    kept a bucket's whole history in one value, which the operator no longer reads. Before
    layout 8 a window aggregate joined with its own maximum per window ran as a join, which
    is now a window Top-N. Before layout 9 the temporal join kept a bucket's versions in one
    value, now in generations by key. Before layout 10 a window aggregate's LISTAGG,
    ARRAY_AGG, FIRST_VALUE and LAST_VALUE collected values without their read order. Before
    layout 11 a GroupAggregate into an upsert consumer ran on streamsql's operator, now on
    Spark's own aggregation. Any other job resumes, and so does one with no operator state yet."""
    state = job(tmp_path)
    state.save()
    saved_as(state, layout)
    state.check(**{concern: True})  # no operator state yet: nothing to lose
    with_operator_state(state)
    state.check()
    with pytest.raises(JobStateError) as error:
        state.check(**{concern: True})
    message = error.value.message
    assert words in message and "STOP JOB" in message
    saved_as(state, STATE_LAYOUT)
    state.check(retiring=True, over=True, argmax=True, temporal=True, ordered=True, native_update=True,
                materializer=True)


def test_a_job_of_layout_5_resumes_and_a_later_layout_is_refused(tmp_path):
    """Layout 5's generations hold no stale rows: read as layout 6's, they resume (a join
    the watermark retires included; no OVER). A layout this streamsql does not know is refused."""
    state = job(tmp_path)
    state.save()
    with_operator_state(state)
    saved_as(state, 5)
    state.check(retiring=True)
    saved_as(state, 7)  # layout 7's OVER generations are layout 8's
    state.check(retiring=True, over=True)
    saved_as(state, 8)  # layout 8's ranked argmax join is layout 9's
    state.check(retiring=True, over=True, argmax=True)
    saved_as(state, 9)  # layout 9's temporal join is layout 10's
    state.check(retiring=True, over=True, argmax=True, temporal=True)
    saved_as(state, 10)  # layout 10's read order is layout 11's
    state.check(retiring=True, over=True, argmax=True, temporal=True, ordered=True)
    saved_as(state, STATE_LAYOUT + 1)
    with pytest.raises(JobStateError, match="by a later streamsql whose stateful operators laid out"):
        state.check()


# -- identity: where a job's rows come from and go to (runtime.locations) -----------------------


def table(name: str, **options) -> TableDef:
    return TableDef(ObjectName("default_database", name), [], {k.replace("_", "-"): v for k, v in options.items()})


def jdbc(table_name: str, url: str = "jdbc:postgresql://127.0.0.1:5432/shop") -> TableDef:
    return table("totals", connector="jdbc", url=url, table_name=table_name)


def kafka(topic: str, servers: str = "127.0.0.1:9092", name: str = "out") -> TableDef:
    return TableDef(ObjectName("default_database", name), [],
                    {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": servers})


def directory_of(tmp_path, target: TableDef, sources=()) -> str:
    return JobState.of(tmp_path / "state", "job", target, "f00d", STREAMING, list(sources)).directory.name


@pytest.mark.parametrize("before, after", [
    (jdbc("t"), jdbc("xb")),
    (jdbc("t"), jdbc("t", "jdbc:postgresql://127.0.0.1:5432/other")),
    (jdbc("t"), jdbc("t", "jdbc:postgresql://127.0.0.1:5433/shop")),
    (jdbc("t"), jdbc("t", "jdbc:postgresql://127.0.0.1:5432/shop?currentSchema=sales")),
    (jdbc("t"), jdbc('"T"')),
    (kafka("a"), kafka("b")),
    (kafka("a"), kafka("a", "127.0.0.2:9092")),
    (table("f", connector="filesystem", path="/data/a", format="csv"),
     table("f", connector="filesystem", path="/data/b", format="csv")),
])
def test_a_sink_pointed_elsewhere_is_another_job(tmp_path, before, after):
    assert directory_of(tmp_path, before) != directory_of(tmp_path, after)


@pytest.mark.parametrize("before, after", [
    (jdbc("t"), jdbc("T")),  # PostgreSQL folds an unquoted name
    (jdbc("sales.t"), jdbc("Sales.T")),
    (jdbc("t"), jdbc("t", "jdbc:postgresql://127.0.0.1/shop")),  # the default port
    (jdbc("t"), jdbc("t", "jdbc:PostgreSQL://127.0.0.1:5432/shop?sslmode=require&connectTimeout=5")),
    (kafka("a;b"), kafka("b; a")),
    (kafka("a", "h1:9092,H2"), kafka("a", "h2:9092, h1")),
    (table("f", connector="filesystem", path="s3://Bucket/a/", format="csv"),
     table("f", connector="filesystem", path="s3://bucket/a", format="csv")),
])
def test_two_spellings_of_one_place_are_one_job(tmp_path, before, after):
    assert directory_of(tmp_path, before) == directory_of(tmp_path, after)


def test_options_that_name_no_data_keep_the_job(tmp_path):
    tuned = table("totals", connector="jdbc", url="jdbc:postgresql://127.0.0.1:5432/shop", table_name="t",
                  sink_buffer_flush_max_rows="500", password="secret")
    assert directory_of(tmp_path, jdbc("t")) == directory_of(tmp_path, tuned)


def test_a_file_sinks_job_keeps_the_directory_an_earlier_streamsql_gave_it(tmp_path):
    """The key of a file sink is as before (name, table, connector, path): its jobs resume."""
    import hashlib

    target = table("f", connector="filesystem", path="/data/a", format="csv")
    key = hashlib.sha1(b"job|default_catalog.default_database.f|filesystem|/data/a").hexdigest()[:12]
    assert directory_of(tmp_path, target) == f"job-{key}"


def test_a_jdbc_job_an_earlier_streamsql_started_resumes_and_is_then_known_by_its_table(tmp_path):
    """A state directory under the old key (no location recorded) is taken as the job's,
    records its location, and is no longer taken once the sink names another table."""
    import hashlib

    old_key = hashlib.sha1(b"job|default_catalog.default_database.totals|jdbc|").hexdigest()[:12]
    legacy = tmp_path / "state" / f"job-{old_key}"
    legacy.mkdir(parents=True)
    (legacy / "job.json").write_text(json.dumps({"name": "job", "fingerprint": "f00d", "mode": STREAMING,
                                                 "state_layout": STATE_LAYOUT}))
    state = JobState.of(tmp_path / "state", "job", jdbc("t"), "f00d", STREAMING)
    assert state.directory == legacy and state.key == old_key
    state.check()
    state.save()
    assert json.loads((legacy / "job.json").read_text())["location"] == [
        ["url", "jdbc:postgresql://127.0.0.1:5432/shop"], ["table-name", "t"]]
    assert JobState.of(tmp_path / "state", "job", jdbc("t"), "f00d", STREAMING).directory == legacy
    moved = JobState.of(tmp_path / "state", "job", jdbc("xb"), "f00d", STREAMING)
    assert moved.directory != legacy and moved.key != old_key


def test_a_source_pointed_at_other_data_is_refused_with_what_changed(tmp_path):
    source = table("bids", connector="filesystem", path="/data/bids", format="csv")
    state = JobState.of(tmp_path / "state", "job", jdbc("t"), "f00d", STREAMING, [source])
    state.save()
    JobState.of(tmp_path / "state", "job", jdbc("t"), "f00d", STREAMING, [source]).check()
    moved = table("bids", connector="filesystem", path="/data/bids-2", format="csv")
    with pytest.raises(JobStateError) as error:
        JobState.of(tmp_path / "state", "job", jdbc("t"), "f00d", STREAMING, [moved]).check()
    message = error.value.message
    assert "read table 'bids' from other data" in message
    assert "'path' was '/data/bids' and is now '/data/bids-2'" in message and "pipeline.name" in message
    topic = kafka("bids", name="bids")
    JobState.of(tmp_path / "s2", "job", jdbc("t"), "f00d", STREAMING, [topic]).save()
    with pytest.raises(JobStateError, match="'topic' was 'bids' and is now 'bids-v2'"):
        JobState.of(tmp_path / "s2", "job", jdbc("t"), "f00d", STREAMING, [kafka("bids-v2", name="bids")]).check()


def test_a_job_recorded_without_its_sources_resumes_and_records_them(tmp_path):
    source = table("bids", connector="filesystem", path="/data/bids", format="csv")
    state = JobState.of(tmp_path / "state", "job", jdbc("t"), "f00d", STREAMING, [source])
    state.save()
    record = json.loads((state.directory / "job.json").read_text())
    del record["sources"], record["location"]
    (state.directory / "job.json").write_text(json.dumps(record))
    moved = JobState.of(tmp_path / "state", "job", jdbc("t"), "f00d", STREAMING,
                        [table("bids", connector="filesystem", path="/data/other", format="csv")])
    moved.check()  # nothing recorded to compare with
    moved.save()
    assert json.loads((state.directory / "job.json").read_text())["sources"] == {
        "default_catalog.default_database.bids": [["path", "/data/other"]]}
