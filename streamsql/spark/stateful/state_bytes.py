"""A state's tables as bytes in Spark's state store: Arrow IPC streams, lz4-compressed, and
back as pandas with exact integers (#10). Used by every stateful operator's store.

Shipped to Python workers by value with ``accumulate`` (pandas, pyarrow).
"""

from __future__ import annotations

import pandas as pd


def settle_worker_heap() -> None:
    """Once per Python worker: the objects it holds by now (pyspark's, pandas', pyarrow's, the
    operator's modules: some 75,000) moved out of the garbage collector's sight (``gc.freeze``).

    Spark's Python worker runs a full ``gc.collect()`` after each task, before it takes the
    next: with pandas and pyarrow loaded that is 50 ms of CPU (100 on a busy machine) a task,
    and a stateful query runs a task per shuffle partition, operator and micro-batch; measured
    on small micro-batches, it was three quarters of the workers' CPU. The collection then
    looks only at what later tasks made. Objects frozen stay: what is garbage among them
    already, once, is never freed. (The mark is on ``sys``: this module travels by value, a
    fresh copy with each task, and ``gc.get_freeze_count`` walks every frozen object.)"""
    import gc
    import sys

    if not getattr(sys, "_streamsql_heap_settled", False):
        gc.freeze()
        sys._streamsql_heap_settled = True


def to_bytes(frame: pd.DataFrame) -> bytes:
    """A pandas table as lz4-compressed Arrow IPC bytes (``from_bytes`` reads it back)."""
    import pyarrow as pa

    return ipc_bytes(pa.Table.from_pandas(frame, preserve_index=False), compression="lz4")


def ipc_bytes(table, compression: str | None = None) -> bytes:
    """An Arrow table as Arrow IPC stream bytes (``ipc_table`` reads them back)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def ipc_table(blob: bytes):
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()


def nullable_ints(column) -> pd.arrays.IntegerArray:
    """An Arrow integer column with NULLs as pandas' nullable Int64: exact (to_pandas would
    make it float64, and a BIGINT past 2^53 loses digits)."""
    values = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    return pd.arrays.IntegerArray(values.fill_null(0).to_numpy(zero_copy_only=False).astype("int64"),
                                  values.is_null().to_numpy(zero_copy_only=False))


def from_bytes(blob: bytes, exact_ints: bool = False) -> pd.DataFrame:
    """A table back from its bytes. ``exact_ints``: an integer column with NULLs comes back as
    nullable Int64 (``nullable_ints``)."""
    return frame_of(ipc_table(blob), exact_ints)


def frame_of(table, exact_ints: bool = False) -> pd.DataFrame:
    """An Arrow table as pandas, as ``from_bytes`` gives it."""
    import pyarrow as pa

    frame = table.to_pandas()
    if exact_ints:
        for field, column in zip(table.schema, table.columns):
            if pa.types.is_integer(field.type) and column.null_count:
                frame[field.name] = nullable_ints(column)
    for field in table.schema:  # ARRAY_AGG's arrays as lists (to_pandas makes NULL items NaN)
        if pa.types.is_list(field.type):
            frame[field.name] = pd.Series(table.column(field.name).to_pylist(), dtype=object)
    return frame
