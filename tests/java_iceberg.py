"""Java programs of the tests (tests/java/) compiled against jars from Maven: Java's own
Iceberg, as the other engine beside streamsql's pyiceberg."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

JAVA = Path(__file__).with_name("java")


def java_classpath(coordinates: list[str], classes: Path, source: str) -> str:
    """``source`` (in tests/java) compiled into ``classes``; the classpath that runs it: the
    coordinates' jars, then PySpark's (Hadoop's client, SLF4J)."""
    import pyspark

    from streamsql.runtime.maven import resolve

    classes.mkdir(parents=True, exist_ok=True)
    classpath = os.pathsep.join([str(classes), *resolve(coordinates, exclude=()),
                                 os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")])
    subprocess.run(["javac", "-d", str(classes), "-cp", classpath, str(JAVA / source)], check=True, capture_output=True)
    return classpath
