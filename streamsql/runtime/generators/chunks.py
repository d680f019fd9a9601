"""What both generators share: rows made a seeded chunk at a time, and Arrow strings.

A chunk's random draws come from a generator seeded by (seed, chunk number), so a row's
content depends only on its number: any split of a row range over tasks or micro-batches
gives the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

CHUNK = 8192  # rows per seeded chunk


def in_chunks(start: int, end: int, make_chunk: Callable[[int], pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Rows ``start`` (inclusive) to ``end`` (exclusive): slices of whole chunks, in order."""
    while start < end:
        chunk = start // CHUNK
        stop = min(end, (chunk + 1) * CHUNK)
        yield make_chunk(chunk).slice(start - chunk * CHUNK, stop - start)
        start = stop


def chunk_rng(seed: int, chunk: int) -> np.random.Generator:
    return np.random.default_rng([seed, 0, chunk])


def strings_from_lengths(chars: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A string array from concatenated character codes and each string's length."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets), pa.py_buffer(chars.astype(np.uint8)))
