"""The Nexmark queries written by hand in PySpark Structured Streaming: the baseline.

What a Spark expert would write for each query Spark can express natively: streaming
CSV reads (one file per micro-batch), watermarks of 4 s, Spark's window(),
session_window() and stream-stream joins, a noop sink. Queries Spark streaming cannot
run (Top-N, dedup, OVER windows, COUNT(DISTINCT), chained aggregations with joins,
processing-time windows over event files) are absent and reported as such.
"""

from __future__ import annotations

QUERIES = {
    "q0": "SELECT auction, bidder, price, dateTime, extra FROM bid",
    "q1": "SELECT auction, bidder, 0.908 * price AS price, dateTime, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0",
    "q3": """SELECT P.name, P.city, P.state, A.id FROM auction AS A JOIN person AS P ON A.seller = P.id
             WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')""",
    "hop_count": """SELECT auction, count(*) AS num, window.start AS window_start, window.end AS window_end
                    FROM bid GROUP BY auction, window(dateTime, '10 seconds', '2 seconds')""",
    "q7": """SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra
             FROM bid B JOIN (
               SELECT MAX(price) AS maxprice, window.end AS dateTime
               FROM bid GROUP BY window(dateTime, '10 seconds')) B1
             ON B.price = B1.maxprice
             AND B.dateTime BETWEEN B1.dateTime - INTERVAL 10 SECONDS AND B1.dateTime""",
    "q10": """SELECT auction, bidder, price, dateTime, extra, date_format(dateTime, 'yyyy-MM-dd'),
              date_format(dateTime, 'HH:mm') FROM bid""",
    "q11": """SELECT bidder, count(*) AS bid_count, session_window.start AS starttime, session_window.end AS endtime
              FROM bid GROUP BY bidder, session_window(dateTime, '10 seconds')""",
    "q13": """SELECT B.auction, B.bidder, B.price, B.dateTime, S.value
              FROM bid B JOIN side_input S ON mod(B.auction, 10000) = S.key""",
    "q14": """SELECT auction, bidder, 0.908 * price AS price,
                CASE WHEN hour(dateTime) >= 8 AND hour(dateTime) <= 18 THEN 'dayTime'
                     WHEN hour(dateTime) <= 6 OR hour(dateTime) >= 20 THEN 'nightTime'
                     ELSE 'otherTime' END AS bidTimeType,
                dateTime, extra, count_char(extra, 'c') AS c_counts
              FROM bid WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
    "q20": """SELECT auction, bidder, price, channel, url, B.dateTime, B.extra,
                itemName, description, initialBid, reserve, A.dateTime AS adt, expires, seller, category, A.extra AS aextra
              FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id WHERE A.category = 10""",
    "q21": """SELECT auction, bidder, price, channel,
                CASE WHEN lower(channel) = 'apple' THEN '0'
                     WHEN lower(channel) = 'google' THEN '1'
                     WHEN lower(channel) = 'facebook' THEN '2'
                     WHEN lower(channel) = 'baidu' THEN '3'
                     ELSE regexp_extract(url, '(&|^)channel_id=([^&]*)', 2) END AS channel_id
              FROM bid WHERE regexp_extract(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL
                OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')""",
    "q22": """SELECT auction, bidder, price, channel,
                split(url, '/')[3] AS dir1, split(url, '/')[4] AS dir2, split(url, '/')[5] AS dir3 FROM bid""",
}


def register_sources(spark, data: str) -> None:
    """Streaming views person/auction/bid over the files (one file per micro-batch), and q13's side input."""
    from data import KINDS, side_input_file, spark_schema

    for name in KINDS:
        frame = (spark.readStream.schema(spark_schema(name)).option("maxFilesPerTrigger", 1)
                 .option("timestampFormat", "yyyy-MM-dd HH:mm:ss.SSS").csv(f"{data}/{name}"))
        frame.withWatermark("dateTime", "4 seconds").createOrReplaceTempView(name)
    spark.read.schema("key BIGINT, value STRING").csv(str(side_input_file())).createOrReplaceTempView("side_input")
    from pyspark.sql.functions import udf

    count_char = udf(lambda s, c: None if s is None else s.count(c), "bigint", useArrow=True)
    spark.udf.register("count_char", count_char)


def run(spark, query: str, data: str, checkpoint: str) -> None:
    """Run one query to the end of its input into Spark's noop sink."""
    register_sources(spark, data)
    frame = spark.sql(QUERIES[query])
    (frame.writeStream.format("noop").outputMode("append")
     .option("checkpointLocation", checkpoint).trigger(availableNow=True).start().awaitTermination())
