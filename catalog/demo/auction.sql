CREATE TABLE auction (
  id BIGINT,
  itemName STRING,
  description STRING,
  initialBid BIGINT,
  reserve BIGINT,
  `dateTime` TIMESTAMP(3),
  expires TIMESTAMP(3),
  seller BIGINT,
  category BIGINT,
  extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
)
WITH (
  'connector' = 'filesystem',
  'path' = 'demo/data/auction.csv',
  'format' = 'csv'
);
