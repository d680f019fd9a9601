-- Bids per auction in 10-second windows sliding by 2 seconds: the HOP aggregation of
-- Nexmark q5 alone (what Spark's window() expresses natively).
USE nexmark;

CREATE TEMPORARY TABLE hop_count (
  auction BIGINT,
  num BIGINT,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

INSERT INTO hop_count
SELECT auction, COUNT(*) AS num, window_start, window_end
FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
