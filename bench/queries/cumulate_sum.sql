-- Running bid volume per channel over each minute, updated every 10 seconds (CUMULATE).
USE nexmark;

CREATE TEMPORARY TABLE cumulate_sum (
  channel VARCHAR,
  bids BIGINT,
  volume BIGINT,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

INSERT INTO cumulate_sum
SELECT channel, COUNT(*) AS bids, SUM(price) AS volume, window_start, window_end
FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND, INTERVAL '1' MINUTE))
GROUP BY channel, window_start, window_end;
