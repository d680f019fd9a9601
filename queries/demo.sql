-- streamsql demo: a streaming pipeline, then an ad hoc query over what it wrote.
-- Reads the bundled demo database (catalog/demo); writes CSV files under target/demo/.

-- The pipeline's checkpoint lives beside its output: delete target/ to start afresh.
SET 'execution.checkpointing.dir' = 'target/demo/checkpoints';

-- Bids above 100,000 in euros, as a continuous pipeline would write them.
CREATE TEMPORARY TABLE euro_bids (
  auction BIGINT,
  bidder BIGINT,
  price_eur DECIMAL(23, 3),
  channel STRING,
  channel_id STRING,
  `dateTime` TIMESTAMP(3)
) WITH (
  'connector' = 'filesystem',
  'path' = 'target/demo/euro_bids',
  'format' = 'csv'
);

-- Streaming mode (Flink's default): the bounded input is read to its end, exactly once.
INSERT INTO euro_bids
SELECT auction, bidder, 0.908 * price, channel,
       REGEXP_EXTRACT(url, '(&|^|\?)channel_id=([^&]*)', 2),
       `dateTime`
FROM demo.bid
WHERE price > 100000;

-- Ad hoc, over the files the pipeline wrote: batch mode runs any query.
SET 'execution.runtime-mode' = 'batch';

SELECT channel,
       COUNT(*) AS bids,
       COUNT(DISTINCT bidder) AS bidders,
       MAX(price_eur) AS top_price_eur,
       DATE_FORMAT(MIN(`dateTime`), 'HH:mm:ss') AS first_bid
FROM euro_bids
GROUP BY channel
ORDER BY bids DESC;
