-- The three highest bids of every 10-second window (window Top-N over the TUMBLE TVF's rows:
-- streamsql's window rank operator on transformWithStateInPandas).
USE nexmark;

CREATE TEMPORARY TABLE window_top3 (
  auction BIGINT,
  price BIGINT,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  rn BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO window_top3
SELECT auction, price, window_start, window_end, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rn
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
) WHERE rn <= 3;
