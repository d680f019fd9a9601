"""Jars from Maven by their coordinates, with what they need at run time, cached locally.

``resolve(["org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"])`` writes a throwaway pom
that depends on the coordinates, has the machine's own Maven copy their runtime
dependencies (``dependency:copy-dependencies -DincludeScope=runtime``) and hands back the
jars' paths (named ``<group>.<artifact>-<version>.jar``). Maven is used as it is configured here (its settings choose the repository):
nothing in this module names one.

What Spark already ships is left out by default (``SPARK_SHIPPED``: Spark's own modules,
Scala, SLF4J, Log4j, Hadoop's client, the compression codecs), as ``spark-submit --packages`` leaves out Spark's
modules: a second copy of those on ``spark.jars`` would at best be dead weight and at worst
load classes of another version beside Spark's. Resolving anything that is not a Spark
connector (a Kafka broker for the tests) passes ``exclude=()``.

Each set of coordinates and exclusions resolves once into its own folder,
``$STREAMSQL_JARS_CACHE/<hash>/`` (else ``~/.cache/streamsql/jars/<hash>/``); a second call
lists that folder without starting Maven. A folder is filled under a temporary name and
renamed into place when complete, so a resolution cut short, or two running at once,
never leave a folder with half the jars. A Maven that is missing, or a coordinate that does
not resolve, is a ``MavenError``: one paragraph naming the coordinates and Maven's own
first ERROR line.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from streamsql.errors import ConnectorError

# The plugin by its full coordinates: Maven 3.8's default (2.8) is older than Java 17.
COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
SCALA = "2.13"
SPARK_MODULES = ("catalyst", "common-utils", "common-utils-java", "config", "connect", "connect-common",
                 "core", "graphx", "hive", "kubernetes", "kvstore", "launcher", "mllib", "mllib-local",
                 "network-common", "network-shuffle", "pipelines", "repl", "sketch", "sql", "sql-api",
                 "streaming", "tags", "unsafe", "variant", "yarn")
# group:artifact, ``*`` for any: what a Spark installation has in its jars/ already.
SPARK_SHIPPED: tuple[str, ...] = (
    *(f"org.apache.spark:spark-{module}_{SCALA}" for module in SPARK_MODULES),
    "org.scala-lang:*", "org.scala-lang.modules:*", "org.slf4j:*", "org.apache.logging.log4j:*",
    "org.apache.hadoop:*",
    # compression and annotations Spark has its own (newer) copy of: kafka-clients pulls them
    "org.lz4:*", "at.yawk.lz4:*", "org.xerial.snappy:*", "com.github.luben:*", "com.google.code.findbugs:*",
)
COORDINATE = re.compile(r"^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+:[A-Za-z0-9_.+-]+(:[A-Za-z0-9_.-]+)?$")  # :classifier
EXCLUSION = re.compile(r"^([A-Za-z0-9_.-]+|\*):([A-Za-z0-9_.-]+|\*)$")
DONE = "coordinates.txt"  # written last into a folder: what it was resolved from
TIMEOUT_S = 1800


class MavenError(ConnectorError):
    """Jars that Maven could not resolve: Maven missing, a coordinate not served, no network."""

    kind = "Maven error"


def cache_root(environ: dict | None = None) -> Path:
    """Where resolved folders live: ``$STREAMSQL_JARS_CACHE``, else ``~/.cache/streamsql/jars``."""
    environ = os.environ if environ is None else environ
    chosen = environ.get("STREAMSQL_JARS_CACHE")
    return Path(chosen) if chosen else Path.home() / ".cache" / "streamsql" / "jars"


def resolve(coordinates: Sequence[str], exclude: Sequence[str] = SPARK_SHIPPED,
            cache: Path | None = None) -> list[str]:
    """The jars of ``coordinates`` (``group:artifact:version``) and of their runtime
    dependencies, less ``exclude`` (``group:artifact``, either may be ``*``) and what only
    those pull in; sorted absolute paths. Resolved by Maven once, then from the cache."""
    wanted, excluded, root, folder = _folder(coordinates, exclude, cache)
    if not wanted:
        return []
    if (folder / DONE).exists():
        return _jars(folder)
    key = folder.name
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    staging.chmod(0o755)
    try:
        _copy_dependencies(wanted, excluded, staging)
        (staging / DONE).write_text("\n".join([*wanted, *(f"exclude {e}" for e in excluded)]) + "\n")
        try:
            os.rename(staging, folder)
        except OSError:  # another resolution of the same coordinates won the race: keep its folder
            if not (folder / DONE).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _jars(folder)


def cached(coordinates: Sequence[str], exclude: Sequence[str] = SPARK_SHIPPED,
           cache: Path | None = None) -> list[str] | None:
    """``resolve``'s jars if they were resolved before (no Maven started), else None."""
    wanted, _, _, folder = _folder(coordinates, exclude, cache)
    if not wanted:
        return []
    return _jars(folder) if (folder / DONE).exists() else None


def _folder(coordinates: Sequence[str], exclude: Sequence[str], cache: Path | None):
    """The sorted coordinates and exclusions, the cache's root and their folder in it."""
    wanted = sorted(set(coordinates))
    bad = [c for c in wanted if not COORDINATE.match(c)] + [e for e in exclude if not EXCLUSION.match(e)]
    if bad:
        raise MavenError(f"cannot resolve {', '.join(wanted)}: {bad[0]!r} is not group:artifact:version[:classifier] "
                         "(nor, as an exclusion, group:artifact)")
    excluded = sorted(set(exclude))
    key = hashlib.sha256("\n".join([*wanted, "--", *excluded]).encode()).hexdigest()[:16]
    root = Path(cache) if cache is not None else cache_root()
    return wanted, excluded, root, root / key


def classpath(coordinates: Sequence[str], exclude: Sequence[str] = SPARK_SHIPPED) -> str:
    """``resolve``'s jars joined for ``java -cp`` or ``spark.jars`` (``os.pathsep``)."""
    return os.pathsep.join(resolve(coordinates, exclude))


def _jars(folder: Path) -> list[str]:
    return sorted(str(p.resolve()) for p in folder.glob("*.jar"))


def _copy_dependencies(coordinates: list[str], exclude: list[str], staging: Path) -> None:
    """Maven copies the jars into ``staging/`` (the pom and Maven's log go in a temp dir)."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError(f"cannot resolve {', '.join(coordinates)}: Maven (mvn) is not on the PATH; "
                         "install it (apt-get install maven) or put the jars on spark.jars yourself")
    with tempfile.TemporaryDirectory(prefix="streamsql-maven-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_pom(coordinates, exclude))
        command = [mvn, "-q", "-B", "-f", str(pom), COPY_GOAL, "-DincludeScope=runtime",
                   f"-DoutputDirectory={staging}", "-Dmdep.prependGroupId=true"]
        try:
            done = subprocess.run(command, cwd=work, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise MavenError(f"cannot resolve {', '.join(coordinates)}: Maven did not finish "
                             f"within {TIMEOUT_S} s") from None
    if done.returncode != 0:
        raise MavenError(f"cannot resolve {', '.join(coordinates)}: {_first_error(done.stdout + done.stderr)}")


def _first_error(output: str) -> str:
    """Maven's first ``[ERROR]`` line (its colour codes dropped), else its last line."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in output.splitlines()]
    errors = [line.removeprefix("[ERROR]").strip() for line in lines if line.startswith("[ERROR]")]
    found = next((line for line in errors if line), None) or next((line for line in reversed(lines) if line), "")
    # (what names the throwaway pom says nothing to the reader)
    found = re.sub(r"^Failed to execute goal on project jars: | for project streamsql\.resolve:jars:pom:0| -> \[Help 1\]$",
                   "", found)
    return found or "Maven failed and printed nothing"


def _pom(coordinates: list[str], exclude: list[str]) -> str:
    """A pom whose only content is its dependencies, each with every exclusion."""
    exclusions = "".join(
        f"<exclusion><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId></exclusion>"
        for g, a in (e.split(":") for e in exclude))
    dependencies = "".join(
        f"<dependency><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId>"
        f"<version>{escape(v)}</version>{''.join(f'<classifier>{escape(c)}</classifier>' for c in classifier)}"
        f"<exclusions>{exclusions}</exclusions></dependency>\n"
        for g, a, v, *classifier in (c.split(":") for c in coordinates))  # g:a:v, or g:a:v:classifier
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            "<project>\n"
            "<modelVersion>4.0.0</modelVersion><groupId>streamsql.resolve</groupId>"
            "<artifactId>jars</artifactId><version>0</version><packaging>pom</packaging>\n"
            f"<dependencies>\n{dependencies}</dependencies>\n</project>\n")
