"""One temporary directory per streamsql process: removed when the process exits, and, when
it was killed, by the next streamsql process to start.

Spark's driver JVM writes its temporary files into ``java.io.tmpdir``: the RocksDB and LZ4
native libraries it unpacks at every start (librocksdbjni, 14 MB), its ``spark-*``
directory (Python files, fetched jars), its block manager's ``blockmgr-*`` (shuffle and
spill files, the state store's working copies). streamsql adds a streaming SELECT's
checkpoint and the drain and end-of-input directories (runtime.drain). A normal exit
removes them all (Spark's shutdown hooks, ``discard``); a ``kill -9``, the OOM killer or a
crash removes none: the JVM is killed with its parent (runtime.lifetime) and runs no hooks,
and each such end left about 20 MB in /tmp, never removed.

So they all go in one directory, ``<tmp>/streamsql-process-<pid>-<random>`` (``tmp`` is
Python's: ``$TMPDIR``, else /tmp), which the driver JVM gets as its ``java.io.tmpdir`` (and
so Spark as its default ``spark.local.dir``). The process holds an exclusive ``flock`` on
the directory's lock file for as long as it lives, and the kernel drops it however the
process ends. At exit the directory is removed, after the JVM has exited; the first call in
a new process removes every such directory whose lock nobody holds (the user's own: a
shared /tmp's others are not readable). A directory is locked before it gets its name, so
one being made is never taken for a killed process's.

A user's ``-Djava.io.tmpdir`` (``spark.driver.extraJavaOptions`` comes after ours on the
JVM's command line), ``spark.local.dir`` or ``SPARK_LOCAL_DIRS`` still wins.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

PREFIX = "streamsql-process-"
STAGED = ".streamsql-process-staged-"
LOCK = ".lock"
STAGED_SECONDS = 60  # a staged directory older than this, unlocked, was left by a kill

_guard = threading.Lock()
_dir: Path | None = None
_owner: int | None = None  # the pid that made _dir (a forked child must not remove it)
_lock_fd: int | None = None


def process_dir() -> Path | None:
    """This process's directory, made on the first call (which also removes those killed
    processes left); None where none can be made, e.g. a temp folder that cannot be written
    (then the system's temp folder is used, as before)."""
    global _dir, _owner, _lock_fd
    with _guard:
        if _dir is not None and _owner == os.getpid():
            return _dir
        parent = Path(tempfile.gettempdir())
        sweep(parent)
        try:
            _dir, _lock_fd = _make(parent)
        except OSError:
            _dir = None
            return None
        _owner = os.getpid()
        atexit.register(_remove)
        return _dir


def java_options() -> str:
    """The driver JVM's option that puts its temporary files in this process's directory
    ('' when there is none, or its path would need quoting on the JVM's command line)."""
    folder = process_dir()
    if folder is None or any(c.isspace() or c in "\"'\\" for c in str(folder)):
        return ""
    return f"-Djava.io.tmpdir={folder}"


def with_process_dir(env: dict[str, str]) -> dict[str, str]:
    """``env`` (the variables a JVM is started with, over this process's) with the option in
    ``SPARK_SUBMIT_OPTS``, before any there already (a user's come later and win)."""
    option = java_options()
    if not option:
        return env
    opts = " ".join(o for o in (option, env.get("SPARK_SUBMIT_OPTS", os.environ.get("SPARK_SUBMIT_OPTS"))) if o)
    return {**env, "SPARK_SUBMIT_OPTS": opts}


def sweep(parent: Path) -> list[Path]:
    """Remove the directories under ``parent`` that killed processes left (nobody holds
    their lock); the ones removed."""
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith((PREFIX, STAGED)):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.name.startswith(STAGED) and time.time() - entry.stat().st_mtime < STAGED_SECONDS:
                continue  # maybe being made right now, not locked yet
        except OSError:
            continue
        if _remove_unless_held(Path(entry.path)):
            removed.append(Path(entry.path))
    return removed


def _make(parent: Path) -> tuple[Path, int]:
    """A new directory, locked before it is renamed to its final name."""
    staged = Path(tempfile.mkdtemp(prefix=STAGED, dir=parent))
    try:
        fd = os.open(staged / LOCK, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            final = parent / f"{PREFIX}{os.getpid()}-{staged.name[len(STAGED):]}"
            os.rename(staged, final)
        except OSError:
            os.close(fd)
            raise
    except OSError:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return final, fd


def _remove_unless_held(folder: Path) -> bool:
    try:
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = None  # a staged directory its process never locked
    except OSError:
        return False  # another user's, or unreadable: not ours to judge
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # its process lives
        shutil.rmtree(folder, ignore_errors=True)
        return not folder.exists()
    finally:
        if fd is not None:
            os.close(fd)


def _remove() -> None:
    """At exit. The driver JVM's end (runtime.lifetime) runs first: it is registered after
    this, since the JVM is launched with the directory already made (``with_process_dir``)."""
    global _dir, _lock_fd
    with _guard:
        if _dir is None or _owner != os.getpid():
            return
        shutil.rmtree(_dir, ignore_errors=True)
        if _lock_fd is not None:
            os.close(_lock_fd)
        _dir, _lock_fd = None, None
