"""The Spark home streamsql's JVMs start from: PySpark's own, less its ``python`` folder.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every Python
process it starts. Python compiles what it imports from a zip each time (zipimport keeps no
bytecode), so each of those processes spent about 0.4 s compiling PySpark before doing
anything. It adds up on streaming queries: ``transformWithStateInPandas`` starts a fresh
Python process on the driver for every stateful operator each time a query starts (to learn
its state variables), and the executors' first worker compiles PySpark too. Measured on
Nexmark q8 (three stateful operators, 50,000 events): each of those driver processes took
0.87 s with the zip and 0.45 s without; the query's first planning 3.5 s against 2.3 s.

A pip-installed PySpark is an ordinary package of this interpreter, compiled when it was
installed, and the zip is a copy of the same files. So when the workers run this
interpreter, and the user has not chosen a Spark home of their own, streamsql launches
Spark from a folder of links to PySpark's (``bin``, ``jars``, ...) without ``python``:
the workers import this interpreter's PySpark, compiled.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

SKIPPED = {"python"}  # what Spark would put on the workers' path
LOCK_WAIT_S = 30  # another start making the home: wait this long, then launch from Spark's own


def compiled_spark_home(environ: dict | None = None, master: str | None = None,
                        conf: dict | None = None) -> str | None:
    """The Spark home to launch Spark from, or None to leave Spark's own: a user's
    SPARK_HOME, workers running another interpreter, no pip-installed PySpark, or a cluster
    manager that ships ``python/lib/pyspark.zip`` to its containers (YARN needs the file;
    only local and standalone masters, whose executors do not read the driver's home, get
    the links)."""
    environ = os.environ if environ is None else environ
    conf = conf or {}
    if environ.get("SPARK_HOME"):
        return None
    master = master or conf.get("spark.master") or "local[*]"
    if not master.startswith(("local", "spark://")):
        return None
    for python in (environ.get("PYSPARK_PYTHON"), conf.get("spark.pyspark.python")):
        if python and os.path.abspath(python) != os.path.abspath(sys.executable):  # it may lack PySpark: it needs the zip
            return None
    import pyspark

    source = Path(pyspark.__file__).resolve().parent
    if not (source / "jars").is_dir() or not (source / "bin").is_dir():
        return None
    try:
        entries = sorted(entry.name for entry in source.iterdir() if entry.is_dir() and entry.name not in SKIPPED)
        # named by what it links to: another PySpark (or one with other folders) gets its own
        name = hashlib.sha1("\0".join([str(source), *entries]).encode()).hexdigest()[:16]
        return str(_links(source, entries, _cache_dir() / name))
    except OSError:  # nowhere to write, or another start holds the lock too long: Spark's own home works, only slower
        return None


def _links(source: Path, entries: list[str], home: Path) -> Path:
    """``home``: a link for each of ``entries`` of ``source``, made once and published whole
    (a rename), so a process launching from it never sees it change. Several streamsql
    processes may start at once: a lock file beside it lets one make it while the others
    wait. A home found incomplete (its links deleted by hand) is moved aside, not emptied."""
    if _complete(home, source, entries):
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / (home.name + ".lock"), "w") as lock:
        _lock(lock)  # released when the file closes
        if _complete(home, source, entries):  # made while this process waited
            return home
        if home.exists() or home.is_symlink():
            os.rename(home, tempfile.mkdtemp(prefix=home.name + ".broken.", dir=home.parent))
        building = Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
        try:
            for name in entries:
                (building / name).symlink_to(source / name, target_is_directory=True)
            os.rename(building, home)
        except OSError:
            shutil.rmtree(building, ignore_errors=True)  # its links only, never what they point to
            raise
    return home


def _lock(lock) -> None:
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise OSError("the Spark home is being made by another process") from None
            time.sleep(0.05)


def _complete(home: Path, source: Path, entries: list[str]) -> bool:
    """Whether ``home`` has exactly the links it should (read, not followed: a folder that is
    itself a link inside PySpark stays as it is)."""
    try:
        return all(os.readlink(home / name) == str(source / name) for name in entries)
    except OSError:  # missing, not a link, or being moved aside by another process
        return False


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "streamsql" / "spark-home"


def jdk_command(name: str) -> Path | None:
    """A command of the JDK Spark's launcher runs (``java``, ``javac``): $JAVA_HOME/bin's,
    else the one on PATH; resolved, or None when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    found = os.path.join(java_home, "bin", name) if java_home else shutil.which(name)
    return Path(found).resolve() if found and os.path.exists(found) else None
