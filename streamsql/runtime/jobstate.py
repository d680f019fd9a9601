"""A job's identity and its state directory.

An INSERT's job is identified by its name (``pipeline.name``, else ``insert-into-<table>``)
and its target: the table, its connector and where its rows go (runtime.locations: a
path, a PostgreSQL URL and table name, Kafka servers and topic) — not by the query text,
and not by the Spark SQL streamsql generates for it. A sink re-pointed elsewhere is a new
job, with a state of its own; a source re-pointed elsewhere is refused (the job's offsets
and state belong to the data it read). Its state directory,
``<checkpoints>/<name>-<key>/``, holds ``job.json`` (the plan fingerprint and how it
runs), Spark's checkpoint (``checkpoint/``), the commit records of what it wrote
(``commits/``) and, for bounded runs, the result it last committed (``results/``).

Resuming is refused, with what to do, when the state cannot be resumed honestly: the
query changed (another fingerprint), the job ran another way before (streaming vs.
bounded), its operators' state was written in a layout this streamsql no longer reads
(``STATE_LAYOUT``), a source now names other data, or the state is gone while the sink
still holds the job's output.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from streamsql.errors import JobStateError
from streamsql.plan.objects import TableDef
from streamsql.runtime.commits import SinkCommitter, write_atomically
from streamsql.runtime.locations import changes, described, location

STREAMING, BOUNDED = "streaming", "bounded"
# How streamsql's stateful operators lay out their state in Spark's checkpoint; a job whose
# checkpoint has state in another layout is not resumed (its operators would start empty).
# 2: GroupAggregate, Rank, the regular join and ChangelogNormalize keep rows in generations.
# 3: COUNT/SUM/AVG DISTINCT kept by (key, value) pair; the regular join keeps a store per side.
# 4: one bucket per shuffle partition, each shuffled under a value of its own partition.
# 5: a regular join's side the watermark retires (plan.join_retiring) is read by an
#    event-time operator, which Spark cannot switch a checkpointed one to; a job of layout 4
#    with no such join resumes as it was.
# 6: a generation a key moved out of keeps the key's old rows, stale, until it is rewritten
#    (spark.stateful.generations); layouts 4 and 5 have none and resume as they were, but
#    an earlier streamsql would read layout 6's stale rows as live.
# 7: OVER keeps a bucket's history in generations by partition hash (spark.stateful.over);
#    a job of layouts 4-6 with no OVER resumes as it was.
# 8: a window aggregate joined with its own maximum per window runs as a window Top-N
#    (plan.argmax_join), other operators than the join it ran as before; a job of layouts
#    4-7 without that shape resumes as it was.
# 9: the event-time temporal join keeps its versions in generations by key hash
#    (spark.stateful.temporal_join); a job of layouts 4-8 without one resumes as it was.
# 10: a window aggregate on Spark's own operator collects LISTAGG, ARRAY_AGG, FIRST_VALUE and
#    LAST_VALUE with each row's read order (spark.arrival_order), a state of another shape;
#    a job of layouts 4-9 without one resumes as it was.
# 11: a GroupAggregate whose consumer takes UPDATE_AFTER only runs on Spark's own streaming
#    aggregation (spark.physical.native_update_aggregate), not streamsql's; a job of layouts
#    4-10 without one resumes as it was.
STATE_LAYOUT = 12
# each earlier layout reads as it is, unless the job has what the layouts after it changed:
BEFORE_RETIRING = 4  # a join the watermark retires, an OVER, an argmax join, a temporal join
BEFORE_STALE_ROWS = 5  # an OVER, an argmax join or a temporal join
BEFORE_OVER_GENERATIONS = 6  # an OVER, an argmax join or a temporal join
BEFORE_ARGMAX_RANK = 7  # an argmax join or a temporal join
BEFORE_TEMPORAL_GENERATIONS = 8  # a temporal join
BEFORE_READ_ORDER = 9  # a window aggregate's LISTAGG, ARRAY_AGG, FIRST_VALUE or LAST_VALUE
BEFORE_NATIVE_UPDATE = 10  # a GroupAggregate on Spark's own aggregation (update mode)
BEFORE_MATERIALIZER = 11  # a sink upsert materializer (ON CONFLICT)
READABLE = (BEFORE_RETIRING, BEFORE_STALE_ROWS, BEFORE_OVER_GENERATIONS, BEFORE_ARGMAX_RANK,
            BEFORE_TEMPORAL_GENERATIONS, BEFORE_READ_ORDER, BEFORE_NATIVE_UPDATE, BEFORE_MATERIALIZER, STATE_LAYOUT)


@dataclass
class JobState:
    name: str
    table: TableDef
    fingerprint: str
    mode: str
    directory: Path
    key: str
    sources: tuple = ()  # (table name, its location) of each table the query reads

    @classmethod
    def of(cls, root: Path, name: str, table: TableDef, fingerprint: str, mode: str,
           sources: list[TableDef] = ()) -> JobState:
        """The job of ``name`` writing ``table``: its key follows the sink's location, so a
        sink re-pointed elsewhere is another job. A state directory an earlier streamsql
        made (its key from the table's name, connector and path alone, its record without
        a location) is taken as this job's while it records no other location."""
        where = location(table)
        path = dict(where).get("path", table.options.get("path", ""))
        extra = [pair for pair in where if pair[0] != "path"]
        target = f"{table.name}|{table.options['connector']}|{path}" + (f"|{described(extra)}" if extra else "")
        legacy = f"{table.name}|{table.options['connector']}|{table.options.get('path', '')}"
        keys = [cls._key(name, target), cls._key(name, legacy)]
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]
        read = tuple(sorted((str(t.name), recorded) for t in sources if (recorded := _recorded(location(t)))))
        chosen = keys[0]
        if not (Path(root) / f"{safe}-{keys[0]}").exists() and keys[1] != keys[0]:
            record = Path(root) / f"{safe}-{keys[1]}" / "job.json"
            if record.exists() and json.loads(record.read_text()).get("location") in (None, _recorded(where)):
                chosen = keys[1]
        return cls(name, table, fingerprint, mode, Path(root) / f"{safe}-{chosen}", chosen, read)

    @staticmethod
    def _key(name: str, target: str) -> str:
        return hashlib.sha1(f"{name}|{target}".encode()).hexdigest()[:12]

    @property
    def checkpoint(self) -> str:
        return str(self.directory / "checkpoint")

    @property
    def results(self) -> Path:
        return self.directory / "results"

    @property
    def is_file_sink(self) -> bool:
        return self.table.options["connector"] == "filesystem"

    def committer(self) -> SinkCommitter:
        """The commit protocol into the target's directory (a table without files, e.g. jdbc,
        keeps only the records, in the state directory)."""
        if not self.is_file_sink:
            return SinkCommitter(str(self.directory / "records"), str(self.directory), self.key)
        return self.committer_for(self.table)

    def committer_for(self, table: TableDef, suffix: str = "") -> SinkCommitter:
        """The commit protocol into a table the job writes (the target, or with a suffix
        another one, such as the late-rows table)."""
        return SinkCommitter(table.options["path"], str(self.directory), self.key + suffix)

    def check(self, retiring: bool = False, over: bool = False, argmax: bool = False,
              temporal: bool = False, ordered: bool = False, native_update: bool = False,
              materializer: bool = False) -> None:
        """Raise when this state must not be resumed (see the module's docstring).
        ``retiring``: the query has a join whose side the watermark retires; ``over``: it
        has an OVER aggregate; ``argmax``: a join with a window aggregate's maximum per
        window, ranked since layout 8 (plan.argmax_join); ``temporal``: an event-time
        temporal join, its versions in generations since layout 9; ``ordered``: a window
        aggregate's order-sensitive calls, collected with the rows' read order since 10;
        ``native_update``: a GroupAggregate on Spark's own aggregation since 11; ``materializer``:
        a sink upsert materializer (ON CONFLICT, plan.sink_materialize) since 12."""
        saved = self._saved()
        label = f"INSERT INTO {self.table.name.name}"
        if saved is None:
            self._check_fresh_sink(label)
            return
        self._check_sources(label, saved)
        if saved.get("fingerprint") != self.fingerprint:
            raise JobStateError(
                f"{label}: the query differs from the one job '{self.name}' ran before, and resuming its"
                f" state ({self.directory}) would mix the results of two queries. Either restore the previous"
                " query, or write to a new sink path, or start the job afresh: delete its state directory"
                f" and the files it wrote ({self._output_pattern()})."
            )
        layout = saved.get("state_layout", 1)
        # (what the query has, the layouts an operator of it cannot resume, why)
        changed = [
            (retiring, BEFORE_RETIRING, BEFORE_RETIRING,
             "whose join kept every row of the side this one drops once the watermark has passed it, and Spark"
             " cannot switch a checkpointed operator to event time"),
            (argmax, BEFORE_RETIRING, BEFORE_ARGMAX_RANK,
             "whose plan joined a window aggregate with its own maximum per window where this one ranks each"
             " window's rows (a window Top-N): the operators and their state differ"),
            (temporal, BEFORE_RETIRING, BEFORE_TEMPORAL_GENERATIONS,
             "whose temporal join kept each bucket's versions in one value, which this one keeps by key and"
             " cannot read"),
            (over, BEFORE_RETIRING, BEFORE_OVER_GENERATIONS,
             "whose OVER operator kept each bucket's history in one value, which this one keeps by partition"
             " and cannot read"),
            (ordered, BEFORE_RETIRING, BEFORE_READ_ORDER,
             "whose window aggregate collected LISTAGG, ARRAY_AGG, FIRST_VALUE or LAST_VALUE without the rows'"
             " read order, which this one keeps beside each value and cannot read"),
            (native_update, BEFORE_RETIRING, BEFORE_NATIVE_UPDATE,
             "whose GroupAggregate ran on streamsql's stateful operator, which this one runs as Spark's own"
             " streaming aggregation (its sink takes UPDATE_AFTER only): the operators and their state differ"),
            (materializer, BEFORE_RETIRING, BEFORE_MATERIALIZER,
             "which wrote to its sink without the upsert materializer this one runs before it (ON CONFLICT):"
             " the operators and their state differ"),
        ]
        for concerned, first, last, why in changed:
            if concerned and first <= layout <= last and self._has_state():
                raise JobStateError(f"{label}: job '{self.name}' was checkpointed by an earlier streamsql {why}."
                                    f" {self._finish_or_start_afresh()}")
        if layout not in READABLE and self._has_state():
            raise JobStateError(
                f"{label}: job '{self.name}' was checkpointed by {'a later' if layout > STATE_LAYOUT else 'an earlier'}"
                f" streamsql whose stateful operators"
                f" laid out their state another way; resumed, they would start empty and its results would be"
                f" wrong. {self._finish_or_start_afresh()}"
            )
        if saved.get("mode") != self.mode:
            raise JobStateError(
                f"{label}: job '{self.name}' ran as a {saved.get('mode')} job before and would now run as a"
                f" {self.mode} one (its sources became {'unbounded' if self.mode == STREAMING else 'bounded'}); its"
                f" state ({self.directory}) cannot carry over. Restore the sources' options, or start afresh:"
                f" delete the state directory and the files it wrote ({self._output_pattern()})."
            )

    def clear_unplanned_checkpoint(self) -> None:
        """Empty Spark's checkpoint when it never planned a batch. A process killed while Spark
        wrote its first offsets leaves a temporary file in ``offsets/`` and nothing committed;
        Spark then starts at batch 0 and refuses the non-empty directory
        (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY). Without a committed offset no batch ran,
        so ``offsets/``, ``commits/`` and ``state/`` hold nothing to keep."""
        root = Path(self.checkpoint)
        offsets = root / "offsets"
        if not offsets.is_dir() or any(entry.name.isdigit() for entry in offsets.iterdir()):
            return
        for name in ("offsets", "commits", "state"):
            shutil.rmtree(root / name, ignore_errors=True)

    def started_partitions(self) -> str | None:
        """The shuffle partitions the job's Spark checkpoint started with (its offset log keeps
        the settings a query cannot change once it has state), or None for a fresh one. A
        resumed query runs with them whatever the session's are now (a changed
        'parallelism.default', or streamsql's default on another machine): Spark does so for
        its own operators, and streamsql's stateful operators must hash their keys into the
        same buckets as before."""
        offsets = Path(self.checkpoint) / "offsets"
        batches = sorted((int(e.name) for e in offsets.iterdir() if e.name.isdigit()), reverse=True) \
            if offsets.is_dir() else []
        for batch in batches:
            try:
                metadata = json.loads((offsets / str(batch)).read_text().splitlines()[1])
                return str(int(metadata["conf"]["spark.sql.shuffle.partitions"]))
            except (OSError, IndexError, ValueError, KeyError, TypeError):
                continue
        return None

    def save(self) -> None:
        """Record the job (first run): its fingerprint, how it runs, and where its rows come
        from and go to (added to the record of a job an earlier streamsql started)."""
        saved = self._saved()
        where = {"location": _recorded(location(self.table)), "sources": dict(self.sources)}
        if saved is not None:
            if "location" not in saved:
                write_atomically(self.directory / "job.json", json.dumps({**saved, **where}, indent=1))
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        record = {"name": self.name, "target": str(self.table.name), "path": self.table.options.get("path"),
                  "fingerprint": self.fingerprint, "mode": self.mode, "state_layout": STATE_LAYOUT, **where}
        write_atomically(self.directory / "job.json", json.dumps(record, indent=1))

    def _check_sources(self, label: str, saved: dict) -> None:
        """Refuse a job whose source tables now name other data than they did when it ran."""
        before = saved.get("sources")
        if before is None:  # recorded by an earlier streamsql: nothing to compare
            return
        now = dict(self.sources)
        for table in sorted(before.keys() & now.keys()):
            if before[table] != now[table]:
                raise JobStateError(
                    f"{label}: job '{self.name}' read table '{table.rsplit('.', 1)[-1]}' from other data: "
                    f"{'; '.join(changes(before[table], now[table]))}. Its offsets and state belong to the data it"
                    " read, and resuming them over other data would mix the two. Restore the table's options, or"
                    " run the query as a new job (SET 'pipeline.name' = '...'), or start afresh: delete its state"
                    f" directory ({self.directory}) and the files it wrote ({self._output_pattern()})."
                )

    def _finish_or_start_afresh(self) -> str:
        return (f"Finish it with the streamsql that started it (STOP JOB ... WITH DRAIN), or start afresh: delete"
                f" its state directory ({self.directory}) and the files it wrote ({self._output_pattern()}).")

    def _has_state(self) -> bool:
        """Whether Spark's checkpoint holds operator state."""
        state = Path(self.checkpoint) / "state"
        return state.is_dir() and any(state.iterdir())

    def _saved(self) -> dict | None:
        path = self.directory / "job.json"
        return json.loads(path.read_text()) if path.exists() else None

    def _check_fresh_sink(self, label: str) -> None:
        if not self.is_file_sink:
            return
        path = Path(self.table.options["path"])
        if (path / "_spark_metadata").is_dir():
            raise JobStateError(
                f"{label}: '{path}' was written by an earlier streamsql through Spark's file sink (it has a"
                " _spark_metadata log). Output is now published by renaming committed files into place, so"
                " files that log left out would become visible: move the directory's content elsewhere, or"
                " write to a new path."
            )
        written = self.committer().published_files() if path.is_dir() else []
        if written:
            raise JobStateError(
                f"{label}: '{path}' holds {len(written)} file(s) written by job '{self.name}'"
                f" ({self._output_pattern()}), but the job's state ({self.directory}) is gone: running it"
                " again would write those rows a second time. Restore the state directory, or delete those"
                " files to start afresh."
            )

    def _output_pattern(self) -> str:
        return f"{self.table.options['path']}/part-{self.key}-*" if self.is_file_sink else "none"


def _recorded(pairs) -> list[list[str]]:
    """A location as job.json keeps it (JSON has lists, not tuples), to compare with what it read."""
    return [list(pair) for pair in pairs]
