"""A Hive metastore — Spark's session catalog of a Spark with Hive support — read from
streamsql's own Spark driver (catalogs.hive shows it as Flink's HiveCatalog).

**How.** Spark's ``HiveExternalCatalog`` (the session catalog of a Spark started with Hive
support) is built beside the session streamsql already runs, from the session's Hadoop
configuration plus the catalog's ``hive-site.xml`` (and ``hadoop-conf-dir``'s files), through
Spark's built-in Hive client (2.3). So the session itself needs no Hive support, and a
catalog created in a running shell works at once. It restores each table as Spark sees
it: a data source table's schema and provider from its properties, a Hive table's from
its SerDe. What it gives is plain Python (``MetastoreTable``): the mapping to Flink's
tables is the catalog's (``catalogs.hive``).

**Which metastore.** ``hive-site.xml`` names it: a metastore service
(``hive.metastore.uris``) or its database (``javax.jdo.option.ConnectionURL``: PostgreSQL,
MySQL, Derby). Without ``hive-conf-dir``, Hive's and Spark's defaults: an embedded Derby
database ``metastore_db`` and the warehouse ``spark-warehouse`` in the working directory,
where a local ``pyspark`` with Hive support keeps its tables. An embedded Derby database
is one process's at a time: another Spark holding it makes the catalog fail, saying so.
"""

from __future__ import annotations

import json
import os
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from streamsql.errors import CatalogError

_OPENED: dict[tuple, object] = {}  # (Spark application, conf dirs) -> the JVM's HiveExternalCatalog
_LOCK = threading.Lock()


@dataclass(frozen=True)
class MetastoreTable:
    database: str
    name: str
    kind: str  # MANAGED, EXTERNAL or VIEW
    provider: str | None  # a data source's (parquet, delta, csv, ...), or 'hive' for a Hive SerDe table
    schema: dict  # Spark's StructType as JSON
    partition_columns: tuple[str, ...] = ()
    location: str | None = None
    serde: str | None = None
    input_format: str | None = None
    properties: dict = field(default_factory=dict)  # the storage's: SerDe properties or a data source's options


def site_properties(conf_dir: str | None, hadoop_conf_dir: str | None = None) -> dict[str, str]:
    """The properties of ``hive-site.xml`` in ``conf_dir`` and of the Hadoop files in
    ``hadoop_conf_dir``; a CatalogError for a missing or unreadable file."""
    files = []
    if hadoop_conf_dir:
        files += [p for p in (Path(hadoop_conf_dir) / n for n in ("core-site.xml", "hdfs-site.xml")) if p.is_file()]
    if conf_dir:
        site = Path(conf_dir) / "hive-site.xml"
        if not site.is_file():
            raise CatalogError(f"'hive-conf-dir' '{conf_dir}' has no hive-site.xml")
        files.append(site)
    properties = {}
    for path in files:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as error:
            raise CatalogError(f"{path} does not load: {error}") from None
        for item in root.iter("property"):
            name, value = item.findtext("name"), item.findtext("value")
            if name:
                properties[name.strip()] = (value or "").strip()
    return properties


class Metastore:
    """The metastore's databases and tables, through ``spark``'s JVM."""

    def __init__(self, spark, conf_dir: str | None, hadoop_conf_dir: str | None = None):
        jvm = getattr(spark, "_jvm", None)
        if jvm is None:
            raise CatalogError("a Hive catalog reads its metastore in streamsql's own Spark driver; through Spark"
                               " Connect (--remote) it is not read yet")
        self._jvm = jvm
        key = (spark.sparkContext.applicationId, conf_dir, hadoop_conf_dir)  # a new SparkContext opens anew
        with _LOCK:
            if key not in _OPENED:
                _OPENED[key] = self._open(spark, site_properties(conf_dir, hadoop_conf_dir))
            self._catalog = _OPENED[key]

    def _open(self, spark, properties: dict[str, str]):
        jvm = self._jvm
        system = jvm.java.lang.System
        if system.getProperty("derby.stream.error.file") is None:  # no derby.log in the working directory
            system.setProperty("derby.stream.error.file", os.devnull)
        conf = spark._jsc.getConf()  # a copy
        hadoop = jvm.org.apache.hadoop.conf.Configuration(spark._jsc.hadoopConfiguration())
        for name, value in properties.items():
            hadoop.set(name, value)
        # Spark's rule (SharedState): Hive's warehouse unless Spark's is set
        warehouse = conf.get("spark.sql.warehouse.dir", None) or properties.get("hive.metastore.warehouse.dir") \
            or os.path.abspath("spark-warehouse")
        conf.set("spark.sql.warehouse.dir", warehouse)
        hadoop.set("hive.metastore.warehouse.dir", warehouse)
        catalog = self._call(lambda: jvm.org.apache.spark.sql.hive.HiveExternalCatalog(conf, hadoop))
        self._call(lambda: catalog.listDatabases())  # connects: a metastore that cannot be reached fails here
        return catalog

    def databases(self) -> list[str]:
        return sorted(_seq(self._call(lambda: self._catalog.listDatabases())))

    def tables(self, database: str) -> list[str]:
        return sorted(_seq(self._call(lambda: self._catalog.listTables(database))))

    def table(self, database: str, name: str) -> MetastoreTable | None:
        catalog = self._catalog
        if not self._call(lambda: catalog.databaseExists(database) and catalog.tableExists(database, name)):
            return None
        found = self._call(lambda: catalog.getTable(database, name))
        storage = found.storage()
        location = _option(storage.locationUri())
        return MetastoreTable(
            database, name, found.tableType().name(), _option(found.provider()), json.loads(found.schema().json()),
            tuple(_seq(found.partitionColumnNames())), location.toString() if location is not None else None,
            _option(storage.serde()), _option(storage.inputFormat()),
            {kv._1(): kv._2() for kv in _seq(storage.properties().toSeq())})

    def _call(self, call):
        from py4j.protocol import Py4JError, Py4JJavaError
        from pyspark.errors.exceptions.captured import CapturedException

        try:
            return call()
        except Py4JJavaError as error:
            raise CatalogError(f"the Hive metastore fails: {_root_cause(error)}") from None
        except Py4JError as error:  # the driver's JVM is gone
            raise CatalogError(f"Spark's driver does not answer: {str(error).strip().splitlines()[0]}") from None
        except CapturedException as error:  # PySpark turns some Java ones into its own
            raise CatalogError(f"the Hive metastore fails: {_root_cause(error)}") from None


def _seq(seq) -> list:
    return [seq.apply(i) for i in range(seq.size())]


def _option(option):
    return option.get() if option.isDefined() else None


def _root_cause(error) -> str:
    """The innermost Java cause's message (Hive wraps a refused connection or a locked Derby
    database in several layers)."""
    throwable = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    message = None
    seen = 0
    while throwable is not None and seen < 20:
        text = throwable.getMessage()
        if text:
            message = text
        throwable, seen = throwable.getCause(), seen + 1
    text = (message or str(error)).strip()
    return text.splitlines()[0] if text else "unknown error"
