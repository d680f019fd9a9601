"""Regenerates the demo database's data: small, deterministic Nexmark-style events.

Run `python catalog/demo/generate.py` to rebuild catalog/demo/data/*.csv (seeded, so
the files come out identical). The demo tables in this folder read them.
"""

import csv
import datetime
import random
from pathlib import Path

DATA = Path(__file__).with_name("data")
START = datetime.datetime(2026, 1, 1, 12, 0, 0)
CHANNELS = ["Google", "Facebook", "Apple", "Baidu", "channel-7", "channel-42"]
CITIES = ["Phoenix", "Seattle", "Portland", "Boise", "San Francisco", "Los Angeles"]
STATES = ["AZ", "WA", "OR", "ID", "CA"]


def timestamp(seconds: float) -> str:
    return (START + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def main(people: int = 200, auctions: int = 600, bids: int = 6000, seed: int = 7) -> None:
    rng = random.Random(seed)
    DATA.mkdir(exist_ok=True)
    with open(DATA / "person.csv", "w", newline="") as f:
        out = csv.writer(f)
        for i in range(people):
            out.writerow([1000 + i, f"person-{i}", f"p{i}@example.com", f"{rng.randrange(10**15, 10**16)}",
                          rng.choice(CITIES), rng.choice(STATES), timestamp(i * 0.5), ""])
    with open(DATA / "auction.csv", "w", newline="") as f:
        out = csv.writer(f)
        for i in range(auctions):
            start = i * 0.2 + rng.random()
            initial = rng.randrange(100, 50000)
            out.writerow([1000 + i, f"item-{i}", "demo item", initial, initial + rng.randrange(0, 5000),
                          timestamp(start), timestamp(start + rng.uniform(5, 60)), 1000 + rng.randrange(people),
                          10 + rng.randrange(5), ""])
    with open(DATA / "bid.csv", "w", newline="") as f:
        out = csv.writer(f)
        for i in range(bids):
            auction = 1000 + min(auctions - 1, int(i * auctions / bids) + rng.randrange(-5, 6))
            channel = rng.choice(CHANNELS)
            url = f"https://www.nexmark.com/{channel.lower()}/item.htm?query=1&channel_id={rng.randrange(100)}"
            out.writerow([max(1000, auction), 1000 + rng.randrange(people), int(rng.lognormvariate(9, 2)),
                          channel, url, timestamp(i * 0.02 + rng.random() * 2), ""])


if __name__ == "__main__":
    main()
