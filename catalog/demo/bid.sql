CREATE TABLE bid (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  channel STRING,
  url STRING,
  `dateTime` TIMESTAMP(3),
  extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
)
WITH (
  'connector' = 'filesystem',
  'path' = 'demo/data/bid.csv',
  'format' = 'csv'
);
