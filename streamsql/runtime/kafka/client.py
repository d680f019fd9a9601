"""Kafka clients (confluent-kafka, i.e. librdkafka) configured from a table's options, and
the offsets Flink's startup and bounded modes name, resolved per partition on the driver
(runtime.kafka.reader hands them to Spark's connector).

Offsets are always explicit, so no consumer group membership is needed: the group is only
where 'group-offsets' are read from and where a stream's consumed offsets are committed,
as Flink does (runtime.kafka.commits). The exactly-once sink produces with these clients too.
"""

from __future__ import annotations

import re

from streamsql.errors import ConnectorError

ISOLATION = "read_uncommitted"  # the Java consumer's default, so Flink's (librdkafka's is read_committed)

TIMEOUT_S = 30
Offsets = dict  # {topic: {partition (str): offset}}: Spark's offset JSON for a Kafka stream


def client_config(options: dict[str, str], table: str) -> dict:
    """'properties.*' without the prefix (librdkafka takes Kafka's common names), quiet logs."""
    config = {key[len("properties."):]: value for key, value in options.items() if key.startswith("properties.")}
    for java_only in ("key.deserializer", "value.deserializer", "key.serializer", "value.serializer"):
        config.pop(java_only, None)  # Flink overrides these too
    config.setdefault("log.connection.close", "false")
    config["streamsql.table"] = table  # removed below; for error messages
    return config


# Java client properties librdkafka has no name for, that only tune Spark's Java clients (the
# driver's librdkafka client goes without them; Spark's connector gets them all).
JAVA_TUNING = frozenset({"fetch.max.wait.ms", "max.poll.records", "default.api.timeout.ms", "buffer.memory",
                         "max.block.ms", "exclude.internal.topics", "interceptor.classes", "metric.reporters"})
_JAAS = re.compile(r"\s*org\.apache\.kafka\.common\.security\.(plain\.PlainLoginModule|scram\.ScramLoginModule)"
                   r"\s+required((?:\s+[\w.]+\s*=\s*\"(?:[^\"\\]|\\.)*\")*)\s*;?\s*")
_JAAS_OPTION = re.compile(r'([\w.]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _librdkafka(config: dict) -> dict:
    """The config for librdkafka: Java's ``sasl.jaas.config`` for PLAIN and SCRAM (Flink's way of
    giving SASL credentials) as librdkafka's ``sasl.username`` / ``sasl.password``, Java's
    tuning-only properties left out."""
    settings = {k: v for k, v in config.items() if k != "streamsql.table" and k not in JAVA_TUNING}
    jaas = settings.pop("sasl.jaas.config", None)
    if jaas is not None:
        match = _JAAS.fullmatch(jaas)
        if match is None:
            module = jaas.split()[0] if jaas.split() else "(empty)"
            raise ConnectorError(f"Table '{config['streamsql.table']}': 'properties.sasl.jaas.config' uses {module}:"
                                 " streamsql takes PlainLoginModule and ScramLoginModule with username and password"
                                 " (SASL PLAIN and SCRAM); Kerberos (GSSAPI) and OAUTHBEARER are not supported yet")
        given = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _JAAS_OPTION.findall(match.group(2))}
        for key in ("username", "password"):
            if key in given:
                settings.setdefault(f"sasl.{key}", given[key])
    return settings


def consumer(config: dict, group: bool = False):
    """A consumer that never joins a group (offsets are assigned); ``group``: keep 'group.id'."""
    from confluent_kafka import KafkaException

    # An assigned offset below the partition's start (deleted by retention) reads from its start.
    settings = {**_librdkafka(config), "enable.auto.commit": "false", "enable.auto.offset.store": "false",
                "auto.offset.reset": "earliest", "isolation.level": config.get("isolation.level", ISOLATION)}
    if not group or "group.id" not in settings:
        settings["group.id"] = settings.get("group.id", "streamsql-reader")
    errors: list = []
    settings["error_cb"] = errors.append  # why a broker cannot be used (a SASL failure, ...): named in errors
    try:
        client = _Consumer(settings, logger=_QUIET)
        client.errors = errors
        return client
    except KafkaException as error:
        raise ConnectorError(f"Table '{config['streamsql.table']}': Kafka client properties: {error.args[0].str()}") from None


def producer(config: dict, extra: dict | None = None):
    from confluent_kafka import KafkaException, Producer

    settings = {**_librdkafka(config), **(extra or {})}
    for consumer_only in ("group.id", "auto.offset.reset", "isolation.level", "partition.discovery.interval.ms"):
        settings.pop(consumer_only, None)
    try:
        return Producer(settings, logger=_QUIET)
    except KafkaException as error:
        raise ConnectorError(f"Table '{config['streamsql.table']}': Kafka client properties: {error.args[0].str()}") from None


class _Recording:
    """Mixed into confluent-kafka's Consumer: the errors librdkafka reported (``errors``)."""

    errors: list


def _Consumer(settings: dict, logger):  # noqa: N802 (it makes the consumer)
    from confluent_kafka import Consumer

    return type("RecordingConsumer", (_Recording, Consumer), {})(settings, logger=logger)


def reason(client, error) -> str:
    """A failed call's message, with the cause librdkafka reported meanwhile when it says more
    (a SASL authentication failure shows as 'Broker transport failure' otherwise)."""
    text = error.args[0].str() if hasattr(error.args[0], "str") else str(error)
    try:
        client.poll(0.5)  # serves the error callback: what librdkafka found meanwhile
    except Exception:  # a closed client, a producer's poll: no more to say
        pass
    causes = [e.str() for e in getattr(client, "errors", []) if "auth" in e.str().lower() or "SASL" in e.str()]
    return f"{text} ({causes[-1]})" if causes else text


class _Quiet:
    """librdkafka's log lines (disconnects of idle connections, ...) are not the user's concern;
    errors reach the caller through return values and exceptions."""

    def log(self, *args, **kwargs):
        pass

    debug = info = warning = error = critical = exception = log

    def isEnabledFor(self, level):  # noqa: N802 (logging.Logger's name)
        return False


_QUIET = _Quiet()


def topic_partitions(client, topics: list[str], pattern: str | None, table: str) -> dict[str, list[int]]:
    """The partitions of the table's topics (or of every topic matching the pattern)."""
    from confluent_kafka import KafkaException

    try:
        metadata = client.list_topics(timeout=TIMEOUT_S)
    except KafkaException as error:
        raise ConnectorError(f"Table '{table}': cannot reach Kafka: {reason(client, error)}") from None
    if pattern is not None:
        regex = re.compile(pattern)
        names = sorted(name for name in metadata.topics if regex.fullmatch(name) and not name.startswith("__"))
    else:
        names = topics
    result = {}
    for name in names:
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None or not topic.partitions:
            raise ConnectorError(f"Table '{table}': topic '{name}' does not exist")
        result[name] = sorted(topic.partitions)
    return result


def watermarks(client, layout: dict[str, list[int]]) -> dict[str, dict[str, tuple[int, int]]]:
    """(low, high) offsets per partition."""
    from confluent_kafka import TopicPartition

    return {topic: {str(p): client.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)
                    for p in partitions} for topic, partitions in layout.items()}


def resolve(client, options: dict[str, str], layout, mode: str, scope: str, table: str) -> Offsets:
    """The offset each partition starts ('scan.startup') or ends ('scan.bounded') at."""
    from confluent_kafka import TopicPartition

    from streamsql.plan.kafka_options import specific_offsets

    marks = watermarks(client, layout)
    low = {t: {p: lh[0] for p, lh in parts.items()} for t, parts in marks.items()}
    high = {t: {p: lh[1] for p, lh in parts.items()} for t, parts in marks.items()}
    if mode == "earliest-offset":
        return low
    if mode == "latest-offset":
        return high
    if mode == "timestamp":
        millis = int(options[f"{scope}.timestamp-millis"])
        wanted = [TopicPartition(t, int(p), millis) for t, parts in marks.items() for p in parts]
        found = client.offsets_for_times(wanted, timeout=TIMEOUT_S)
        # No record at or after the time: the partition's end.
        return _clamped({t: {str(tp.partition): (tp.offset if tp.offset >= 0 else high[t][str(tp.partition)])
                             for tp in found if tp.topic == t} for t in marks}, low, high)
    if mode == "specific-offsets":
        given = specific_offsets(options[f"{scope}.specific-offsets"])
        # Partitions not listed: Flink falls back to the committed offsets (startup) / reads them to the end.
        fallback = low if scope == "scan.startup" else high
        return _clamped({t: {p: given.get(int(p), fallback[t][p]) for p in parts} for t, parts in marks.items()}, low, high)
    # group-offsets
    wanted = [TopicPartition(t, int(p)) for t, parts in marks.items() for p in parts]
    committed = client.committed(wanted, timeout=TIMEOUT_S)
    reset = options.get("properties.auto.offset.reset", "none" if scope == "scan.startup" else "latest")
    result: Offsets = {t: {} for t in marks}
    for tp in committed:
        if tp.offset >= 0:
            result[tp.topic][str(tp.partition)] = tp.offset
        elif reset == "none":
            raise ConnectorError(
                f"Table '{table}': group '{options['properties.group.id']}' has no committed offset for"
                f" {tp.topic} partition {tp.partition}; set 'properties.auto.offset.reset' (earliest or latest)"
                f" or another '{scope}.mode'")
        else:
            result[tp.topic][str(tp.partition)] = (low if reset == "earliest" else high)[tp.topic][str(tp.partition)]
    return _clamped(result, low, high)


def _clamped(offsets: Offsets, low, high) -> Offsets:
    return {t: {p: max(low[t][p], min(o, high[t][p])) for p, o in parts.items()} for t, parts in offsets.items()}
