"""The shell's Spark, warmed behind the prompt (#10).

A JVM and its Python workers run their first streaming query slowly: the JVM compiles the
code paths a micro-batch takes (the CSV reader, the Arrow transfer to Python, the shuffle,
the state store) as it first runs them, and each Python worker imports pandas and pyarrow
and loads streamsql's operators. Measured on 2 cores (the machine of the README's
benchmarks), a streaming GROUP BY over 3,000 rows took 3.97 s to its result in a fresh
session and 1.71 s after another small stateful query had run; Nexmark q17 over 1 M events,
10.7 s against 6.8 s.

So once Spark is ready the shell runs such a query itself, while the user types: a
streaming ``GROUP BY`` with COUNT, SUM, MAX and COUNT(DISTINCT) (streamsql's stateful
group aggregate) over two small CSV files of its own, read a file a micro-batch, its rows
discarded: about 4 s of the cores. It uses a catalog of its own (nothing of the user's
catalog, settings or Spark's session settings changes) and a scratch directory in the
process's (removed when done). A statement that needs Spark first lets a warm-up still
running end (``settle``; at most ``WAIT`` seconds, then it is stopped): stopping it would
cut off its tasks, which Spark reports in words of its own, and the statement then runs in
the JVM the warm-up has just compiled. A statement typed before Spark is ready means no
warm-up at all, and leaving the shell stops it at once. Only for a local master: a
cluster's executors could not read its files. ``streamsql --no-warm-up`` turns it off. A
failure of its own is never shown: the first query is merely slower.
"""

from __future__ import annotations

import io
import shutil
import tempfile
import threading
from pathlib import Path

FILES, ROWS = 2, 2_000
TABLE = "streamsql_warm_up"
# A statement that needs Spark waits at most this long for a running warm-up to end; past
# that, it stops the warm-up's query and waits at most this long for its thread to end
WAIT, STOPPING = 10.0, 30.0
QUERY = f"SELECT k, COUNT(*), SUM(v), MAX(v), COUNT(DISTINCT s) FROM {TABLE} GROUP BY k"


def applies(master: str | None, remote: str | None) -> bool:
    """Whether a warm-up can run: executors inside the driver (a local master), which read
    its scratch files."""
    from streamsql.runtime.shipping import runs_in_driver

    return remote is None and runs_in_driver(master)


class WarmUp:
    """One warm-up of a SparkSession, in a background thread."""

    def __init__(self):
        self.spark = None
        self.finished = False  # it ran to its end
        self._stop = threading.Event()  # settle came: never start
        self._abort = threading.Event()  # ... and it ran too long: stop its query
        self._queries: list = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self, spark) -> None:
        """Warm ``spark`` up, unless ``settle`` came first."""
        with self._lock:
            if self._stop.is_set() or self._thread is not None:
                return
            self.spark = spark
            self._thread = threading.Thread(target=self._run, name="streamsql-warm-up", daemon=True)
            self._thread.start()

    def settle(self, wait: float = WAIT) -> None:
        """Let a warm-up that runs end (for at most ``wait`` seconds, then it is stopped), or
        never start one."""
        with self._lock:
            self._stop.set()
            thread = self._thread
        if thread is None or not thread.is_alive():
            return
        thread.join(wait)
        if thread.is_alive():
            with self._lock:
                self._abort.set()
                queries = list(self._queries)
            for query in queries:
                _quietly(query.stop)
            thread.join(STOPPING)

    def _run(self) -> None:
        from streamsql.runtime.process_dir import process_dir
        from streamsql.runtime.results import ResultWriter

        scratch = None
        try:
            scratch = Path(tempfile.mkdtemp(prefix="streamsql-warm-up-", dir=process_dir()))
            self._write_rows(scratch / "rows")
            self._engine(scratch).run_script(_script(scratch / "rows"), ResultWriter("csv", io.StringIO()))
            self.finished = not self._abort.is_set()
        except BaseException:  # never the user's concern: the first query is merely slower
            pass
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)

    @staticmethod
    def _write_rows(directory: Path) -> None:
        directory.mkdir()
        for part in range(FILES):
            lines = (f"{i % 50},{i},s{i % 7}\n" for i in range(part * ROWS, (part + 1) * ROWS))
            (directory / f"part-{part}.csv").write_text("".join(lines))

    def _engine(self, scratch: Path):
        from streamsql.catalog import Catalog
        from streamsql.runtime.engine import Engine

        warm_up = self

        class WarmUpEngine(Engine):
            def _start_streaming(self, plan, start):
                query, observed = super()._start_streaming(plan, start)
                with warm_up._lock:
                    warm_up._queries.append(query)
                    aborted = warm_up._abort.is_set()
                if aborted:  # (settle stopped it while the query started)
                    _quietly(query.stop)
                return query, observed

        engine = WarmUpEngine(Catalog(None), spark=self.spark, base_dir=scratch, log=lambda message: None)
        for key, value in {"execution.runtime-mode": "streaming", "execution.bounded-input": "stream"}.items():
            engine.settings.set(key, value)
        return engine


def _script(rows: Path) -> str:
    path = str(rows).replace("'", "''")
    return (f"CREATE TEMPORARY TABLE {TABLE} (k INT, v BIGINT, s STRING) "
            f"WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');\n{QUERY};\n")


def _quietly(call) -> None:
    try:
        call()
    except Exception:
        pass
