CREATE TABLE person (
  id BIGINT,
  name STRING,
  emailAddress STRING,
  creditCard STRING,
  city STRING,
  state STRING,
  `dateTime` TIMESTAMP(3),
  extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
)
WITH (
  'connector' = 'filesystem',
  'path' = 'demo/data/person.csv',
  'format' = 'csv'
);
