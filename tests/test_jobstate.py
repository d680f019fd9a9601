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


def test_a_checkpoint_with_state_in_an_older_layout_is_not_resumed(tmp_path):
    state = job(tmp_path)
    state.save()
    record = json.loads((state.directory / "job.json").read_text())
    assert record["state_layout"] == STATE_LAYOUT
    state.check()  # the same layout: resumed
    del record["state_layout"]  # as streamsql wrote it before generations
    (state.directory / "job.json").write_text(json.dumps(record))
    state.check()  # no operator state yet: nothing to lose
    (state.directory / "checkpoint" / "state" / "0").mkdir(parents=True)
    with pytest.raises(JobStateError) as error:
        state.check()
    message = error.value.message
    assert "laid out their state another way" in message and "would start empty" in message
    assert str(state.directory) in message and "STOP JOB" in message


def test_a_job_of_the_layout_before_resumes_unless_a_join_of_it_now_runs_in_event_time(tmp_path):
    """Layout 4 kept a regular join's every row in an operator without event time; Spark
    refuses to switch a checkpointed operator to event time, so a job whose join now lets the
    watermark retire a side's rows is refused, in streamsql's words, and any other resumes."""
    state = job(tmp_path)
    state.save()
    record = json.loads((state.directory / "job.json").read_text())
    record["state_layout"] = 4
    (state.directory / "job.json").write_text(json.dumps(record))
    (state.directory / "checkpoint" / "state" / "0").mkdir(parents=True)
    state.check()
    state.check(retiring=False)
    with pytest.raises(JobStateError) as error:
        state.check(retiring=True)
    message = error.value.message
    assert "drops once the watermark has passed it" in message and "STOP JOB" in message
    record["state_layout"] = STATE_LAYOUT
    (state.directory / "job.json").write_text(json.dumps(record))
    state.check(retiring=True)


def test_a_job_of_layout_5_resumes_and_a_later_layout_is_refused(tmp_path):
    """Layout 5's generations hold no stale rows: read as layout 6's, they resume (a join
    the watermark retires included; no OVER). A layout this streamsql does not know is refused."""
    state = job(tmp_path)
    state.save()
    record = json.loads((state.directory / "job.json").read_text())
    (state.directory / "checkpoint" / "state" / "0").mkdir(parents=True)
    record["state_layout"] = 5
    (state.directory / "job.json").write_text(json.dumps(record))
    state.check(retiring=True)
    record["state_layout"] = STATE_LAYOUT + 1
    (state.directory / "job.json").write_text(json.dumps(record))
    with pytest.raises(JobStateError, match="by a later streamsql whose stateful operators laid out"):
        state.check()


@pytest.mark.parametrize("layout", [4, 5, 6])
def test_a_job_with_an_over_aggregate_of_an_earlier_layout_is_refused(tmp_path, layout):
    """Before layout 7 OVER kept a bucket's whole history in one value, which the operator
    no longer reads: a job with an OVER is refused, one without resumes."""
    state = job(tmp_path)
    state.save()
    record = json.loads((state.directory / "job.json").read_text())
    record["state_layout"] = layout
    (state.directory / "job.json").write_text(json.dumps(record))
    state.check(over=True)  # no operator state yet: nothing to lose
    (state.directory / "checkpoint" / "state" / "0").mkdir(parents=True)
    state.check(over=False)
    with pytest.raises(JobStateError) as error:
        state.check(over=True)
    message = error.value.message
    assert "OVER operator kept each bucket's history in one value" in message and "STOP JOB" in message
    record["state_layout"] = STATE_LAYOUT
    (state.directory / "job.json").write_text(json.dumps(record))
    state.check(retiring=True, over=True)
