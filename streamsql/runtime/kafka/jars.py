"""Spark's own Kafka connector on a session's ``spark.jars``.

'kafka' and 'upsert-kafka' tables are read (and, at least once, written) by
``org.apache.spark:spark-sql-kafka-0-10_2.13``, which PySpark does not ship, and their 'avro'
format by ``spark-avro``. Their jars (the connector, spark-token-provider-kafka,
kafka-clients, commons-pool2, spark-avro: about 11 MB) come from
Maven through runtime.maven, once per machine, then from its cache.

When a local session starts (runtime.session) the jars go at the end of the driver's class
path (``local[*]``: the executors are in its JVM) or on ``spark.jars`` (which ships them to a
cluster's executors) if they are cached already (listing a folder, no
Maven), or else if a Kafka table was defined in this process before Spark started (then
Maven resolves them, a few seconds the first time). A session that never sees a Kafka table
on a machine where nothing is cached never starts Maven, and a Maven that is missing or
fails never keeps Spark from starting: reading a Kafka table then fails with one paragraph
(``missing_connector``) naming the table and how to get the jars.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

# The newest spark-sql-kafka-0-10 this machine's Maven serves (4.3.0, PySpark's own version,
# is not); 4.2.0 reads and writes batches and streams on Spark 4.3. Move it with Spark once
# 4.3.x is served.
CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
AVRO = "org.apache.spark:spark-avro_2.13:4.2.0"  # the 'avro' format's from_avro/to_avro (4.2.0, as the connector)
PACKAGES = [CONNECTOR, AVRO]  # resolved together, into one cached folder
CONNECTOR_JAR = "spark-sql-kafka-0-10_"  # in the jar's file name
PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
APPENDED_KEY = "spark.streamsql.driver.appendedClassPath"  # streamsql's own: see with_kafka_jars

_failure: list[str] = []  # why the last attempt to resolve the jars failed (Maven's words)


@contextmanager
def connector_needed(table: str, spark):
    """Around a read or write through ``format("kafka")``: Spark's 'no such data source' becomes
    ``missing_connector``'s paragraph; any other error passes as it is."""
    try:
        yield
    except Exception as error:  # noqa: BLE001 (Py4J's and Spark Connect's errors alike)
        text = str(error)
        if "DATA_SOURCE_NOT_FOUND" in text or "Failed to find data source: kafka" in text:
            raise missing_connector(table, spark) from None
        raise


def client_options(options: dict[str, str], held_back: frozenset[str]) -> dict[str, str]:
    """A table's 'properties.*' as the Kafka client options of Spark's connector (``kafka.*``),
    but for the ``held_back`` ones Flink or Spark set themselves; its bootstrap servers."""
    passed = {f"kafka.{key[len('properties.'):]}": value for key, value in options.items()
              if key.startswith("properties.") and key[len("properties."):] not in held_back}
    return {**passed, "kafka.bootstrap.servers": options["properties.bootstrap.servers"]}


def with_kafka_jars(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the connector's jars added to ``spark.jars`` (see the module); as it is
    when they are there already, or are neither cached nor wanted yet, or Maven fails."""
    from streamsql.plan.kafka_options import kafka_defined
    from streamsql.runtime.maven import MavenError, cached, resolve

    given = [j for j in conf.get("spark.jars", "").split(",") if j.strip()]
    on_class_path = [*conf.get("spark.driver.extraClassPath", "").split(os.pathsep),
                     *conf.get(APPENDED_KEY, "").split(os.pathsep)]
    if any(CONNECTOR_JAR in j.rsplit("/", 1)[-1] for j in [*given, *on_class_path]):
        return conf  # the user's own
    jars = cached(PACKAGES)
    if jars is None and kafka_defined():
        try:
            jars = resolve(PACKAGES)
        except MavenError as error:
            _failure[:] = [str(error)]
    if not jars:
        return conf
    from streamsql.runtime.shipping import runs_in_driver

    if runs_in_driver(conf.get("spark.master")):
        # Executors in the driver's JVM: at the end of its class path (SPARK_DIST_CLASSPATH,
        # set from APPENDED_KEY where the JVM is launched), not fetched into each executor's
        # work directory as spark.jars would be (a chmod process per jar), nor before Spark's
        # jars as spark.driver.extraClassPath would be (the JVM's class archive, made for the
        # class path without them, would no longer map: runtime.class_archive).
        paths = [p for p in conf.get(APPENDED_KEY, "").split(os.pathsep) if p]
        return {**conf, APPENDED_KEY: os.pathsep.join([*paths, *jars])}
    return {**conf, "spark.jars": ",".join([*given, *jars])}


def missing_connector(table: str, spark=None):
    """The error for a Kafka table read in a session without the connector: why it is
    missing and how to fix it. Resolves the jars now if it can, for the next session."""
    from streamsql.errors import ConnectorError
    from streamsql.runtime.maven import MavenError, cached, resolve

    head = (f"Table '{table}' is read and written with Spark's Kafka connector ({CONNECTOR}), which is not on"
            " this Spark session's classpath")
    if spark is not None and type(spark).__module__.startswith("pyspark.sql.connect"):
        return ConnectorError(f"{head}: the Spark Connect server needs it on its own spark.jars (or --packages)")
    if cached(PACKAGES) is None:
        try:
            resolve(PACKAGES)
        except MavenError as error:
            _failure[:] = [str(error)]
            return ConnectorError(
                f"{head}: {error}. streamsql fetches it with Maven once per machine and keeps it"
                " (~/.cache/streamsql/jars, or $STREAMSQL_JARS_CACHE); the jars to put on 'spark.jars' otherwise are"
                " the connector's with kafka-clients, spark-token-provider-kafka-0-10 and commons-pool2"
                " (--conf spark.jars=a.jar,b.jar)")
    return ConnectorError(
        f"{head}: Spark started before the connector's jars were resolved (they are now, and cached):"
        " start streamsql again and rerun the statement")


def appended_class_path(conf: dict[str, str]) -> dict[str, str]:
    """The launch environment that puts ``with_kafka_jars``' local jars at the end of the JVM's
    class path (Spark's launcher appends SPARK_DIST_CLASSPATH after its own jars)."""
    jars = [p for p in conf.get(APPENDED_KEY, "").split(os.pathsep) if p]
    if not jars:
        return {}
    given = [p for p in os.environ.get("SPARK_DIST_CLASSPATH", "").split(os.pathsep) if p]
    return {"SPARK_DIST_CLASSPATH": os.pathsep.join([*given, *jars])}
