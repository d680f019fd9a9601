"""Spark starts behind the prompt: the shell opens at once, a one-line status says how far
Spark is, and a statement typed meanwhile runs as soon as Spark is ready."""

from __future__ import annotations

import threading
import time
from typing import Callable


class SparkStarter:
    """Starts the engine's Spark in a background thread and reports on it in one line."""

    def __init__(self, engine, on_change: Callable[[], None] = lambda: None, clock=time.monotonic,
                 warm_up: bool = False):
        self.engine = engine
        self.warm_up = warm_up  # then, once ready, Spark is warmed up behind the prompt (runtime.warm_up)
        self.on_change = on_change
        self.clock = clock
        self.began = self.ended = None
        self.error: BaseException | None = None
        self.seen = False  # the outcome (ready, or failed) was said
        self._thread: threading.Thread | None = None

    @property
    def target(self) -> str:
        if self.engine.remote:
            return self.engine.remote
        return self.engine.spark_conf().get("spark.master", "local[*]")

    def start(self) -> None:
        if self.warm_up:
            from streamsql.runtime.warm_up import WarmUp, applies

            if applies(self.engine.spark_conf().get("spark.master"), self.engine.remote):
                self.engine.warm_up = WarmUp()  # (a statement that needs Spark first stops it before it starts)
        self.began = self.clock()
        self._thread = threading.Thread(target=self._run, name="streamsql-spark-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            spark = self.engine.start_spark()
        except BaseException as error:  # the first statement that needs Spark reports it
            self.error = error
        self.ended = self.clock()
        self.on_change()
        if self.error is None and self.engine.warm_up is not None:
            self.engine.warm_up.start(spark)

    @property
    def ready(self) -> bool:
        return self.ended is not None and self.error is None

    def status(self) -> str | None:
        """The status line: starting, ready (and how long it took), or failed."""
        if self.began is None:
            return None
        if self.ended is None:
            return f"Starting Spark ({self.target})…"
        if self.error is not None:
            first = str(self.error).strip().splitlines()[0] if str(self.error).strip() else type(self.error).__name__
            return f"Spark did not start: {first[:120]}"
        return f"Spark ready ({self.target}) in {self.ended - self.began:.1f} s"

    def wait(self, seconds: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(seconds)
        return self.ended is not None
