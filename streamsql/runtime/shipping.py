"""The streamsql code a cluster's executors import: the driver's own, shipped with the job.

Python workers import streamsql for the parts of a query that run there by reference (the
generated sources' readers, the PostgreSQL sink's writers, ...). On a cluster that would be
whichever streamsql is installed on the workers (another version, or none at all), so the
driver ships its own package as a zip (`SparkContext.addPyFile`), which Spark puts ahead of
the installed packages on the workers' path. In local mode the workers already share the
driver's path. The zip is named by a hash of its content, so a rerun reuses it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import streamsql

PACKAGE = Path(streamsql.__file__).resolve().parent


def runs_in_driver(master: str | None) -> bool:
    """Whether the executors of ``master`` run inside the driver (and share its Python path)."""
    return not master or master == "local" or master.startswith("local[")


def ship_package(spark_context) -> Path:
    """Ship this streamsql to the executors; the zip's path."""
    archive = package_zip()
    spark_context.addPyFile(str(archive))
    return archive


def package_zip(directory: Path | None = None, package: Path = PACKAGE) -> Path:
    """A zip of the streamsql package (sources and data files, no caches), named by its content."""
    files = sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    target = Path(directory or tempfile.gettempdir()) / f"streamsql-{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, Path("streamsql") / path.relative_to(package))
    os.replace(partial, target)  # whole or absent: a concurrent run may be writing the same zip
    return target
