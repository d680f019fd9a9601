"""Running planned statements: DDL into the catalog, queries and INSERTs on Spark.

A script is parsed and planned in full first (against a staged catalog), so a typo in
the last statement fails in milliseconds, before Spark starts and before anything is
stored. Spark starts only when a statement needs it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable, ContextManager
import tempfile
import threading
from pathlib import Path

from streamsql.catalog import Catalog
from streamsql.dialect.script import parse_script
from streamsql.errors import ExecutionError, StreamsqlError
from streamsql.plan.planner import (
    DefineStep,
    DropStep,
    ExplainStep,
    InsertStep,
    JobsStep,
    ResultStep,
    StatementSetStep,
    StopJobStep,
    Planner,
    QueryPlan,
    QueryStep,
    SetStep,
    Step,
)
from streamsql.runtime.drain import DrainSources
from streamsql.runtime.end_of_input import discard_scratch
from streamsql.runtime.execution import check_operators, streams
from streamsql.runtime.process_dir import process_dir
from streamsql.runtime.reports import report_skipped, report_streaming_late
from streamsql.runtime.results import EXECUTED, RESET_ALL, RESET_DONE, SET_DONE, SUBMITTING, UPDATE_DONE, ResultWriter, java_text
from streamsql.runtime.select_stream import follow_memory_sink, select_sink, show_watermark
from streamsql.runtime.settings import Settings


class Engine:
    """One user session: a catalog, SET values, and (once needed) a SparkSession."""

    def __init__(self, catalog: Catalog, master: str | None = None, remote: str | None = None,
                 base_dir: str | Path | None = None, log=None, spark=None):
        self.catalog = catalog
        self.settings = Settings()
        self.master = master
        self.remote = remote
        # A streaming SELECT's rows reach this process through a memory table it polls
        # (runtime.select_stream) rather than a foreachBatch calling back into Python: so
        # through Spark Connect, and in the SQL Gateway's sessions.
        self.results_through_memory = remote is not None
        self.base_dir = Path(base_dir or Path.cwd())
        self.log = log or (lambda message: print(message, file=sys.stderr))
        if catalog.warn is None:  # catalog files that do not load are reported in this session's log
            catalog.warn = self.log
        catalog.catalogs.session = lambda: self.spark  # a 'hive' catalog reads its metastore through Spark
        self._spark = spark
        self._spark_lock = threading.Lock()
        self._owns_spark = spark is None
        # What shows while Spark starts (`run` on a terminal: a transient status line).
        self.spark_starting: Callable[[str], ContextManager] = lambda target: contextlib.nullcontext()
        # plan id -> (the plan, the stateful stages it streams with: spark.stateful.chain); the
        # plan is kept so that its id is never another plan's
        self._stages: dict[int, tuple] = {}
        self.drain = DrainSources()
        self.warm_up = None  # the shell's warm-up of Spark (runtime.warm_up): it ends before a statement uses Spark
        self.spark_ui = False  # Spark's UI on (runtime.spark_ui): `streamsql run`, not the shell

    # -- scripts -----------------------------------------------------------------------

    def plan_script(self, text: str) -> list[Step]:
        """Parse and validate every statement; raises on the first problem, with its position."""
        statement = None
        try:
            settings = self.settings.copy()  # with the script's SETs, as they come
            planner = Planner(self.catalog.staged(), self.base_dir, settings)
            steps = []
            for statement in parse_script(text):
                step = self._plan(planner, statement)
                if isinstance(step, SetStep):
                    if step.key is not None:
                        settings.set(step.key, step.value)
                else:
                    check_operators(self, step, settings)
                steps.append(step)
            return steps
        except StreamsqlError as error:
            if error.position is None and statement is not None:
                error.position = statement.position
            raise error.with_source(text)

    def run_script(self, text: str, writer: ResultWriter) -> None:
        """Validate the whole script, then run its statements in order."""
        steps = self.plan_script(text)
        planner = Planner(self.catalog, self.base_dir, self.settings)
        for statement, step in zip(parse_script(text), steps):
            try:
                # Plan again against the live catalog: earlier steps have now really run.
                self.execute(self._plan(planner, statement), writer)
            except StreamsqlError as error:
                raise error.with_source(text)

    @staticmethod
    def _plan(planner: Planner, statement) -> Step:
        """The planner's step, or a filtered SHOW listing (runtime/show.py)."""
        from streamsql.runtime.show import plan_listing

        try:
            step = plan_listing(statement.expression, planner.catalog)
        except StreamsqlError as error:
            error.position = error.position or statement.position
            raise
        return step or planner.plan(statement)

    def execute(self, step: Step, writer: ResultWriter) -> None:
        """Run a step planned against the live catalog.

        DDL steps have nothing left to do: planning them against the live catalog
        registered (and stored) the object already.
        """
        if isinstance(step, (DefineStep, DropStep)):
            writer.info(EXECUTED)
            return
        if isinstance(step, ResultStep):
            if step.columns:
                writer.table(step.columns, step.rows)
            else:  # USE, CREATE / DROP DATABASE
                writer.info(EXECUTED)
            if getattr(step, "note", None):
                writer.info(step.note)
        elif isinstance(step, SetStep):
            self._apply_setting(step, writer)
        elif isinstance(step, ExplainStep):
            from streamsql.runtime.explain import explain

            writer.text("plan", explain(self, step.step))
        elif isinstance(step, JobsStep):
            from streamsql.runtime.jobs import COLUMNS

            registry = self.jobs_registry
            runs = [(r, 0) for r in registry.all()] if step.every_run else registry.latest()
            writer.table(COLUMNS, [record.row(restarts) for record, restarts in runs])
        elif isinstance(step, QueryStep):
            self._run_query(step, writer)
        elif isinstance(step, (InsertStep, StatementSetStep)):
            writer.info(SUBMITTING)
            self._run_inserts([step] if isinstance(step, InsertStep) else step.inserts)
            writer.info(UPDATE_DONE)
        elif isinstance(step, StopJobStep):
            record = self.jobs_registry.stop(step.job_id, step.drain)
            if step.drain:
                self.log(f"Draining job {record.id} ({record.name}): its open windows fire, then it finishes.")
            else:
                self.log(f"Stopping job {record.id} ({record.name}); its checkpoint is kept: run the script again to resume.")

    # -- Spark -------------------------------------------------------------------------

    @property
    def spark(self):
        """The SparkSession, started on first use (the shell starts it in a background thread:
        the lock makes a query typed meanwhile wait for that one). A warm-up of the shell's
        (runtime.warm_up) ends first, or never starts."""
        if self.warm_up is not None:
            self.warm_up.settle()
        return self.start_spark()

    def start_spark(self):
        """The SparkSession, started if it is not yet; a warm-up goes on."""
        with self._spark_lock:
            if self._spark is None:
                from streamsql.runtime.session import start_session

                conf = self.spark_conf()
                with self.spark_starting(self.remote or conf.get("spark.master", "local[*]")):
                    self._spark = start_session(conf, self.remote)
        return self._spark

    def spark_conf(self) -> dict[str, str]:
        """What Spark starts with: streamsql's defaults, then the session's spark.* settings."""
        from streamsql.runtime.session import default_conf

        return {**default_conf(self.master, ui=self.spark_ui), **self.settings.spark_conf()}

    def stop(self) -> None:
        if self.warm_up is not None:
            self.warm_up.settle(wait=0)
        if self._spark is not None and self._owns_spark:
            from streamsql.runtime.lifetime import driver_jvm_exit, forget_dead_gateway

            if driver_jvm_exit(wait=0) is None:
                self._spark.stop()
            else:  # Spark's JVM died under us: nothing to stop, and nothing to ask
                forget_dead_gateway()
        self._spark = None
        self.drain.discard()

    def cancel(self) -> None:
        """Stop whatever this session is running (Ctrl-C in the REPL)."""
        if self._spark is None:
            return
        for query in self._spark.streams.active:
            query.stop()
        if self.remote:
            self._spark.interruptAll()
        else:
            self._spark.sparkContext.cancelAllJobs()

    def _apply_setting(self, step: SetStep, writer: ResultWriter) -> None:
        if step.key is None:
            writer.table(["key", "value"], self.settings.rows())
            return
        self.settings.set(step.key, step.value)
        writer.info(RESET_ALL if step.key == "__all__" else SET_DONE if step.value is not None else RESET_DONE)
        if step.key == "table.exec.state.ttl" and step.value is not None:
            self.log("Note: 'table.exec.state.ttl' applies to GroupAggregate, Rank, Deduplicate and regular"
                     " joins (all on streamsql's operators then): a row's or key's state expires that long after"
                     " its last change. Windows, interval and temporal joins keep theirs until the watermark"
                     " passes it.")
        if self._spark is not None:
            for key, value in self.settings.spark_conf().items():
                if key.startswith("spark.sql.") and self._spark.conf.get(key, None) != value:
                    self._spark.conf.set(key, value)

    def _frame(self, plan: QueryPlan, streaming: bool, late_writes: list | None = None):
        """The query as a DataFrame over its sources, and the metrics observed on the way
        (runtime.query_frames)."""
        from streamsql.runtime.query_frames import query_frame

        return query_frame(self, plan, streaming, late_writes)

    def stages_of(self, plan: QueryPlan):
        """The stateful stages a plan streams with (runtime.execution.stateful_stages), or None."""
        entry = self._stages.get(id(plan))
        return entry[1] if entry is not None and entry[0] is plan else None

    def _shows_row_kinds(self, writer: ResultWriter, plan: QueryPlan | None = None) -> bool:
        """Results print their row kinds (+I, -U, +U, -D) in 'changelog' result mode, and
        always when they update as they stream (a changelog cannot be shown without them),
        unless the writer shows them its own way (the shell's live result)."""
        if plan is not None and self.stages_of(plan) is not None:
            from streamsql.spark.stateful.stages import inserts_only

            if not inserts_only(self.stages_of(plan)):
                return True
        mode = (self.settings.get("sql-client.execution.result-mode") or "table").lower()
        return mode == "changelog" and not getattr(writer, "handles_row_kinds", False)

    def _displayable(self, frame, plan: QueryPlan, writer: ResultWriter | None = None):
        """Timestamps as the wall-clock values Flink shows: TIMESTAMP as stored (UTC),
        TIMESTAMP_LTZ in 'table.local-time-zone'. Python then gets naive datetimes. With
        row kinds shown, the kind comes first (an insert-only result's rows are all +I)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import TimestampType
        from sqlglot import exp

        from streamsql.changelog import INSERT, ROWKIND_COLUMN

        zone = self.settings.get("table.local-time-zone") or "UTC"
        columns = []
        has_kinds = ROWKIND_COLUMN in frame.columns
        if writer is not None and (self._shows_row_kinds(writer, plan) or has_kinds):
            columns.append(F.col(ROWKIND_COLUMN) if has_kinds else F.lit(INSERT).alias(ROWKIND_COLUMN))
        fields = [f for f in frame.schema.fields if f.name != ROWKIND_COLUMN]
        for field, column in zip(fields, plan.columns):
            value = F.col(f"`{field.name}`")
            if isinstance(field.dataType, TimestampType):
                if column.type is not None and column.type.this == exp.DType.TIMESTAMPLTZ:
                    value = F.from_utc_timestamp(value, zone)
                value = value.cast("timestamp_ntz").alias(field.name)
            columns.append(value)
        frame = frame.select(*columns)
        return java_text(frame, numbers=writer is not None and writer.fmt == "json")

    def _run_query(self, step: QueryStep, writer: ResultWriter) -> None:
        from streamsql.runtime.failures import translate

        plan = step.plan
        names = [c.name for c in plan.columns]
        if getattr(writer, "shows_labels", False) and len(plan.labels) == len(names):
            names = list(plan.labels)  # the shell heads `SELECT a + 1` with `a + 1`, not EXPR$0
        streaming = streams(self, step)
        if self._shows_row_kinds(writer, plan):  # Flink's changelog result mode: the op column first
            names = ["op", *names]
        checkpoint = tempfile.mkdtemp(prefix="streamsql-query-", dir=process_dir()) if streaming else None
        query = None
        try:
            writer.begin(names)
            observed = {}
            if streaming:
                query, observed = self._start_streaming(plan, select_sink(self, plan, writer, checkpoint))
            if query is None:
                frame, observed = self._frame(plan, streaming=False)
                writer.begin(names)  # again: nothing was written yet (the header comes with the rows)
                writer.rows(self._displayable(frame, plan, writer).collect())
            elif self.results_through_memory:
                follow_memory_sink(self, query, writer)
            else:
                self._await(query, lambda: show_watermark(writer, query))
        except StreamsqlError:
            raise
        except Exception as error:  # Spark and py4j errors carry Java traces: reduce them.
            raise translate(error) from None
        finally:
            if checkpoint is not None:
                discard_scratch(query, checkpoint)
        writer.end()
        report_skipped(self.log, observed, query)

    def _run_inserts(self, steps: list[InsertStep]) -> None:
        """Run INSERTs as one job: streaming ones side by side in this Spark application,
        recorded in the job registry while they run."""
        from streamsql.runtime.failures import translate
        from streamsql.runtime.jobs import CANCELED, FAILED, FINISHED, JobMonitor, StopRequested
        from streamsql.runtime.progress import ProgressDisplay

        from streamsql.runtime.inserts import insert_name, job_names, start_insert

        started, monitor = [], None
        try:
            for step, name in zip(steps, job_names(steps, self.settings.get("pipeline.name"))):
                query, observed = start_insert(self, step, name)
                started.append((query, observed))
            queries = [q for q, _ in started if q is not None]
            if queries:
                name = self.settings.get("pipeline.name") or ", ".join(insert_name(s) for s in steps)
                monitor = JobMonitor(self.jobs_registry, name, self.spark, os.environ.get("STREAMSQL_JOB_LOG"))
                from streamsql.runtime.dashboard.plan_graph import graphs  # what `streamsql ui` draws

                monitor.record.plans = graphs([(s, q.name) for s, (q, _) in zip(steps, started) if q is not None],
                                              self.settings)
                monitor.start()
            with ProgressDisplay(queries):
                from streamsql.runtime.waiting import await_queries

                await_queries(self, queries)
        except StopRequested:
            self._stop_all(started)
            monitor and monitor.finish(CANCELED)
            raise
        except BaseException as error:
            from streamsql.runtime.lifetime import driver_jvm_exit, jvm_exit_message

            died = driver_jvm_exit(wait=0 if isinstance(error, (StreamsqlError, KeyboardInterrupt)) else 2)
            if died is not None:  # nothing left to stop: record and say it, in one paragraph
                started.clear()
                message = jvm_exit_message(*died)
                monitor and monitor.finish(FAILED, message)
                raise ExecutionError(message) from None
            self._stop_all(started)
            failure = error if isinstance(error, (StreamsqlError, KeyboardInterrupt)) else translate(error)
            if monitor:
                monitor.finish(FAILED if not isinstance(error, KeyboardInterrupt) else CANCELED, str(failure))
            if failure is error:
                raise
            raise failure from None
        finally:
            for query, _ in started:
                discard_scratch(query)
        if monitor:
            monitor.finish(FINISHED)
        for query, observed in started:
            report_skipped(self.log, observed, query)
            report_streaming_late(self.log, query)

    @staticmethod
    def _stop_all(started: list) -> None:
        for query, _ in started:
            if query is not None and query.isActive:
                query.stop()

    @property
    def jobs_registry(self):
        from streamsql.runtime.jobs import JobRegistry

        base = self.catalog.directory or Path(tempfile.gettempdir()) / "streamsql"
        return JobRegistry(Path(base) / "_jobs")

    def _start_streaming(self, plan: QueryPlan, start) -> tuple:
        """Start a streaming query."""
        from streamsql.runtime.end_of_input import END_OF_INPUT, EndOfInput

        frame, observed = self._frame(plan, streaming=True)
        ends = observed.pop(END_OF_INPUT, None)
        query = start(frame)
        if ends is not None:  # bounded input as a stream: once more with the end-of-input sentinel
            query = EndOfInput(query, lambda: start(frame), ends)
        return query, observed

    def _await(self, query, each_wait=None) -> None:
        """Wait for a streaming query in short steps (runtime.waiting)."""
        from streamsql.runtime.waiting import await_query

        await_query(self, query, each_wait)
