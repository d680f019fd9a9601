"""Child JVMs that cannot outlive the streamsql process that started them.

PySpark's driver JVM exits when its stdin pipe reaches EOF, which holds only while no
other process has inherited the pipe's write end, and the JVM's exit then runs Spark's
shutdown hooks, which may wait. Spark's Connect server (`streamsql serve`) watches
nothing at all. So on Linux every JVM streamsql starts asks the kernel for SIGKILL when
its parent dies (``prctl(PR_SET_PDEATHSIG)``): a ``kill -9`` of streamsql takes its JVM
with it. On a normal exit the driver JVM is instead shut down in order (stdin closed,
then waited for), so Spark's shutdown hooks still clean up its temporary directories.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import os
import re
import signal
import subprocess
import sys
import threading
from typing import Callable

_PR_SET_PDEATHSIG = 1
_JVM_EXIT_SECONDS = 15


def _load_prctl() -> Callable | None:
    """libc's prctl, looked up before any fork (a forked child should not load libraries)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()


def die_with_parent(ignore_sigterm: bool = False) -> Callable[[], None]:
    """A Popen ``preexec_fn``: the child gets SIGKILL when this process (strictly: the thread
    that forks it) ends. Also makes the child ignore SIGINT, as PySpark does for its JVM:
    Ctrl-C is for streamsql, which then stops Spark in order. With ``ignore_sigterm`` SIGTERM
    too (the JVM then installs no handler for it): a SIGTERM sent to the whole process group
    (``timeout``, a supervisor's ``kill -- -pgid``) would otherwise end the JVM under a running
    query while streamsql, which got it too, stops its queries in order."""
    parent = os.getpid()
    prctl = _prctl

    def preexec() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if ignore_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)

    return preexec


class _ChainedPreexec(dict):
    """popen_kwargs for PySpark's launch_gateway, which sets its own ``preexec_fn``
    (ignore SIGINT) over any given one: run ours after theirs instead of losing it."""

    def __setitem__(self, key, value):
        if key == "preexec_fn" and "preexec_fn" in self:
            ours = self["preexec_fn"]

            def both(theirs=value, ours=ours):
                theirs()
                ours()

            value = both
        super().__setitem__(key, value)


def launch_driver_gateway(conf: dict[str, str]) -> None:
    """Start PySpark's driver JVM (the py4j gateway) tied to this process, and make it the
    one the next SparkContext uses. A no-op when a gateway is already up."""
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.java_gateway import launch_gateway

    from streamsql.runtime.class_archive import launch_env
    from streamsql.runtime.process_dir import with_process_dir
    from streamsql.runtime.spark_home import compiled_spark_home

    with SparkContext._lock:
        if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
            return
        spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))

        def launch():
            kwargs = _ChainedPreexec(preexec_fn=die_with_parent(ignore_sigterm=True), stderr=subprocess.PIPE)
            home = compiled_spark_home(conf=conf)
            env = {}
            if home is not None:  # launch_gateway reads these (under SparkContext._lock); runtime.class_archive
                env = {"SPARK_HOME": home, **launch_env(home, os.environ.get("SPARK_CONF_DIR"),
                                                         conf.get("spark.driver.extraClassPath"))}
            from streamsql.runtime.kafka.jars import appended_class_path

            from streamsql.runtime.spark_ui import ui_env

            env = with_process_dir({**env, **appended_class_path(conf), **ui_env(conf)})  # Spark's UI on loopback
            before = {key: os.environ.get(key) for key in env}
            os.environ.update(env)
            try:
                return launch_gateway(spark_conf, popen_kwargs=kwargs)
            finally:
                for key, value in before.items():
                    if value is None:
                        del os.environ[key]
                    else:
                        os.environ[key] = value

        gateway = _in_lasting_thread(launch)
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm
    if gateway.proc is not None:
        if gateway.proc.stderr is not None:
            forward_stderr(gateway.proc.stderr)
        atexit.register(stop_driver_gateway)


# What the JVM and Spark print while starting, with nothing for a person to act on; shown
# with --verbose (STREAMSQL_VERBOSE) only.
STARTUP_CHATTER = re.compile(
    r"^(?:WARNING: Using incubator modules|Setting default log level|To adjust logging level use sc\.setLogLevel"
    r"|NOTE: SPARK_PREPEND_CLASSES is set)"
)
# What Spark's transformWithStateInPandas workers print as they start and finish each call
# of a stateful operator (each line followed by a blank one): also shown with --verbose only.
WORKER_CHATTER = re.compile(r"^(?:Starting )?Streaming TransformWithStateInPandas Python worker")


# A traceback whose first frame is in the Python process Spark runs a Python data source's
# stream in (the generated sources) on the driver. It prints one when a stopped query closes
# its socket (EOFError, then BrokenPipeError), and any error of its own reaches the query,
# which streamsql reports in one paragraph: shown with --verbose only.
RUNNER_FRAME = re.compile(r'^\s+File ".*/pyspark/sql/streaming/python_streaming_\w+\.py"')
TRACEBACK_PART = re.compile(r"^(?:\s|$|Traceback \(most recent call last\):|During handling of the above exception"
                            r"|The above exception was the direct cause|[A-Za-z_][\w.]*(?::.*)?$)")


def forward_stderr(pipe, fd: int = 2) -> threading.Thread:
    """Copy a child's stderr to file descriptor ``fd`` (ours, which it used to inherit),
    without Spark's start-up chatter and its data source runner's tracebacks unless verbose."""
    verbose = bool(os.environ.get("STREAMSQL_VERBOSE"))

    def write(raw: bytes) -> None:
        try:
            os.write(fd, raw)
        except OSError:  # our stderr is gone: keep draining, so the JVM never blocks
            pass

    def copy() -> None:
        after_chatter = False
        held = None  # a "Traceback" line, until the next line tells whose it is
        in_runner = False
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace")
            if verbose:
                write(raw)
                continue
            if held is not None:
                in_runner = bool(RUNNER_FRAME.match(line))
                if not in_runner:
                    write(held)
                held = None
                if in_runner:
                    continue
            elif in_runner:
                if TRACEBACK_PART.match(line):
                    continue
                in_runner = False
            if line.startswith("Traceback (most recent call last):"):
                held = raw
                continue
            chatter = bool(STARTUP_CHATTER.match(line) or WORKER_CHATTER.match(line))
            blank_after = after_chatter and not line.strip()
            after_chatter = chatter
            if not (chatter or blank_after):
                write(raw)
        if held is not None:
            write(held)

    thread = threading.Thread(target=copy, name="streamsql-jvm-stderr", daemon=True)
    thread.start()
    return thread


def stop_driver_gateway(seconds: float = _JVM_EXIT_SECONDS) -> None:
    """End the driver JVM in order: its stdin closes, Spark's shutdown hooks run, it exits
    (killed if it takes longer than ``seconds``). The next SparkSession starts a new one."""
    from pyspark.core.context import SparkContext

    with SparkContext._lock:
        gateway, SparkContext._gateway, SparkContext._jvm = SparkContext._gateway, None, None
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    try:
        gateway.shutdown()
    except Exception:  # the JVM may already be gone; its exit is what matters
        pass
    end_process(proc, close_stdin=True, seconds=seconds)


def driver_jvm_exit(wait: float = 2.0) -> tuple[int, int] | None:
    """(pid, exit status) of this process's driver JVM if it has exited under us, else None.
    A JVM killed under a running query first shows as a refused py4j connection, an instant
    before the kernel reports its exit: wait up to ``wait`` seconds for that."""
    from pyspark.core.context import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        return None
    try:
        code = proc.wait(wait) if wait else proc.poll()
    except subprocess.TimeoutExpired:
        return None
    return None if code is None else (proc.pid, code)


def jvm_exit_message(pid: int, code: int, resumable: bool = True) -> str:
    """The one paragraph a user reads when Spark's JVM died under streamsql."""
    if code < 0:
        try:
            how = f"killed by signal {-code}, {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = f"exit status {code}" + (", out of memory?" if code == 137 else "")
    then = ("the job stopped; run the same command to resume from its last checkpoint" if resumable
            else "the session's queries stopped; start streamsql again")
    return f"Spark's JVM (pid {pid}) exited unexpectedly ({how}): {then}."


def forget_dead_gateway() -> None:
    """Drop a gateway whose JVM has exited, so that stopping Spark does not talk to it."""
    from pyspark.core.context import SparkContext

    with SparkContext._lock:
        SparkContext._gateway = SparkContext._jvm = None
        SparkContext._active_spark_context = None


def end_process(proc: subprocess.Popen, close_stdin: bool = False, seconds: float = _JVM_EXIT_SECONDS) -> None:
    """Ask a child to stop (EOF on stdin, or SIGTERM) and wait; SIGKILL if it does not."""
    if proc.poll() is not None:
        return
    try:
        if close_stdin and proc.stdin is not None:
            proc.stdin.close()
        else:
            proc.terminate()
        proc.wait(seconds)
    except (subprocess.TimeoutExpired, OSError):
        proc.kill()
        proc.wait()


def _in_lasting_thread(launch: Callable):
    """Run ``launch`` where the fork's thread lives as long as the process: PR_SET_PDEATHSIG
    fires when the forking *thread* ends, so a session started from a short-lived thread
    would lose its JVM with it. The main thread qualifies; otherwise a parked daemon thread."""
    if threading.current_thread() is threading.main_thread():
        return launch()
    outcome: dict = {}
    ready = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = launch()
        except BaseException as error:  # handed to the caller below
            outcome["error"] = error
        ready.set()
        threading.Event().wait()  # parked for the life of the process

    threading.Thread(target=run, name="streamsql-jvm-parent", daemon=True).start()
    ready.wait()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
