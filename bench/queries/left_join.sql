-- Every bid with its bidder's name, NULL until the person is known (a LEFT JOIN: streamsql's
-- regular Join operator on transformWithStateInPandas; the null-padded row is retracted when
-- the person arrives).
USE nexmark;

CREATE TEMPORARY TABLE left_join (
  auction BIGINT,
  price BIGINT,
  name VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO left_join
SELECT B.auction, B.price, P.name
FROM bid AS B LEFT JOIN person AS P ON B.bidder = P.id;
