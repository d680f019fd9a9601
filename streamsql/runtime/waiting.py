"""Waiting for a streaming query: in short steps, so Ctrl-C, STOP JOB and a drain land
between py4j calls, never inside one (a py4j call cut in half printed pages of Python
tracebacks and the stream thread's Java errors)."""

from __future__ import annotations

import contextlib
import signal
import threading


def await_query(engine, query, each_wait=None) -> None:
    """Wait for ``query`` to end; ``each_wait`` (if given) runs after every step, the last
    one included. Ctrl-C and STOP JOB stop the query cleanly, then go on up; a drain
    (STOP JOB ... WITH DRAIN) releases the end-of-input sentinel and stops the query once
    its watermark has reached it."""
    await_queries(engine, [query], each_wait)


def await_queries(engine, queries: list, each_wait=None) -> None:
    """Wait for every query of a job (a statement set's INSERTs run side by side). The
    first one to fail fails the job and stops the others, as a failing part fails a Flink
    job; a job that waited on its first query alone would hang on when another failed."""
    from streamsql.runtime.drain import drained
    from streamsql.runtime.jobs import DRAIN, check_stop

    pending = list(queries)
    with _interrupts_between_calls() as interrupted:
        try:
            while pending:
                if interrupted.is_set():
                    raise KeyboardInterrupt
                for query in list(pending):
                    if query.awaitTermination(0.5 / len(pending)):  # raises if the query failed
                        pending.remove(query)
                        if query.exception() is not None:
                            raise query.exception()
                if each_wait is not None:
                    each_wait()
                if DRAIN.is_set() and pending:
                    engine.drain.release()
                    for query in list(pending):
                        if drained(query):
                            query.stop()
                            engine.log(f"Drained {query.name or 'the query'}: every open window fired.")
                            pending.remove(query)
                check_stop()
        except BaseException:
            for query in queries:
                query.stop()
            raise


@contextlib.contextmanager
def _interrupts_between_calls():
    """SIGINT sets a flag the wait loop checks between its calls (main thread only, where
    signals arrive)."""
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)
