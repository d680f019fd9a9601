"""Spark's real-time mode (Spark 4.1+, ``trigger(realTime=...)``) for the queries it runs:
``SET 'execution.trigger' = 'real-time'``.

In real-time mode a streaming query's tasks keep running for a whole batch duration and pass
each record on as it arrives, instead of starting a micro-batch every interval: latency is
the time a record takes through the tasks, milliseconds, not the trigger's interval. Spark
runs it for stateless queries from Kafka into Kafka (its Kafka source and sink; neither
``foreachBatch`` nor a file or memory sink), in update output mode. So streamsql chooses it
only for an ``INSERT INTO`` a ``kafka`` or ``upsert-kafka`` table of projections and filters
over Kafka tables read as streams, written at least once ('sink.delivery-guarantee' =
'at-least-once' or 'none': Kafka transactions need a micro-batch to commit); any other shape
is refused at plan time, naming what real-time mode cannot run. The batch duration (how often
offsets and progress are checkpointed) is 'execution.checkpointing.interval', by default 5 s.
"""

from __future__ import annotations

from streamsql.plan.connectors import KAFKA
from streamsql.plan.objects import TableDef
from streamsql.plan.operators import Calc, Operator, Scan, Sink, walk

SETTING = "execution.trigger"
DEFAULT_BATCH = "5 s"
_WHY = "Spark's real-time mode runs stateless queries from Kafka into Kafka"


def wanted(settings) -> bool:
    return (settings.get(SETTING) or "").lower() == "real-time"


def refusal(root: Operator, sink: TableDef | None, tables: list[TableDef]) -> str | None:
    """Why real-time mode cannot run this query (and how to run it in micro-batches), or None."""
    reason = _reason(root, sink, tables)
    return reason and f"{reason}. RESET '{SETTING}' runs it in micro-batches"


def _reason(root: Operator, sink: TableDef | None, tables: list[TableDef]) -> str | None:
    head = f"'{SETTING}' = 'real-time': "
    if sink is None:
        return head + f"a SELECT is shown through micro-batches; write it with INSERT INTO a Kafka table ({_WHY})"
    if sink.options.get("connector") not in KAFKA:
        return head + f"the sink '{sink.name.name}' is a '{sink.options.get('connector')}' table ({_WHY})"
    if sink.options.get("sink.delivery-guarantee") == "exactly-once":
        return head + (f"the sink '{sink.name.name}' writes exactly once, in Kafka transactions committed per"
                       " micro-batch; real-time mode writes at least once ('sink.delivery-guarantee' = 'at-least-once')")
    for table in tables:
        if table.options.get("connector") not in KAFKA:
            return head + f"the source '{table.name.name}' is a '{table.options.get('connector')}' table ({_WHY})"
        if "scan.bounded.mode" in table.options:
            return head + f"the source '{table.name.name}' is bounded ('scan.bounded.mode'); real-time mode reads streams"
    for node in walk(root):
        if isinstance(node, Scan) and not node.mode.insert_only:
            return head + f"the source '{node.describe()}' is a changelog ({_WHY}, of inserts)"
        if not isinstance(node, (Scan, Calc, Sink)):
            return head + f"{node.describe()} keeps state or waits on time ({_WHY}: projections and filters)"
    return None
