-- Each bid with the average and the top of its auction's last 10 bids (an OVER window:
-- streamsql's OverAggregate on transformWithStateInPandas; Spark has no streaming form).
USE nexmark;

CREATE TEMPORARY TABLE over_avg (
  auction BIGINT,
  price BIGINT,
  recent_avg BIGINT,
  recent_top BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO over_avg
SELECT auction, price, AVG(price) OVER w, MAX(price) OVER w
FROM bid
WINDOW w AS (PARTITION BY auction ORDER BY `dateTime` ROWS BETWEEN 9 PRECEDING AND CURRENT ROW);
