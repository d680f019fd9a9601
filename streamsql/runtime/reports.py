"""What a finished query tells the user: rows skipped as malformed, rows dropped as late."""

from __future__ import annotations

from streamsql.plan.windows import WindowRelation


def report_streaming_late(log, query) -> None:
    """Rows a streaming query's stateful operators dropped behind the watermark."""
    from streamsql.runtime.jobs import late_rows_dropped

    if query is None:
        return
    dropped = sum(late_rows_dropped(p) for p in query.recentProgress)
    if dropped:
        log(f"Dropped {dropped} late row(s) in {query.name or 'the query'} (behind the watermark)")


def report_skipped(log, observed: dict, query) -> None:
    """How many malformed rows each source skipped (batch: an Observation; streaming: the
    metric summed over the query's micro-batches), and late rows a window dropped."""
    for metric, source in observed.items():
        if isinstance(source, tuple) and isinstance(source[0], WindowRelation):
            window, observation = source
            _report_late(log, window, observation.get.get("rows", 0))
            continue
        if isinstance(source, tuple):
            table, observation = source
            skipped = observation.get.get("rows", 0)
        else:
            table = source
            skipped = sum(int(p.observedMetrics[metric]["rows"] or 0)
                          for p in query.recentProgress if metric in (p.observedMetrics or {}))
        if skipped:
            log(f"Skipped {skipped} malformed row(s) in table '{table.name.name}' ({table.options['path']})")


def _report_late(log, window: WindowRelation, dropped: int) -> None:
    if not dropped:
        return
    where = f"; written to table '{window.late_table.name.name}'" if window.late_table else ""
    log(f"Dropped {dropped} late row(s) of table '{window.late_source.name.name}' in a {window.kind}"
        f" window on {window.time_column}{where}")
