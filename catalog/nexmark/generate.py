"""Writes data/side_input.csv: the static table Nexmark q13 joins bids with (key, value)."""

import random
from pathlib import Path

KEYS = 10_000  # q13 joins on MOD(auction, 10000)

random.seed(7)
with open(Path(__file__).with_name("data") / "side_input.csv", "w") as out:
    for key in range(KEYS):
        out.write(f"{key},v{random.randrange(100_000)}\n")
