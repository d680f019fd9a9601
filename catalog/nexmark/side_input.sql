CREATE TABLE side_input (
  key BIGINT,
  `value` VARCHAR
) WITH (
  'connector' = 'filesystem',
  'path' = 'nexmark/data/side_input.csv',
  'format' = 'csv'
);
