-- Every auction with the bids whose price equals its reserve, NULL while there is none (a
-- LEFT JOIN keyed by a price: no locality in time). The bids are the join's inner side,
-- insert-only and keeping no partner counts: only looked up by the auctions' keys, never
-- rewritten (streamsql/spark/stateful/join.py, looked_up).
USE nexmark;

CREATE TEMPORARY TABLE left_join_by_price (
  id BIGINT,
  reserve BIGINT,
  auction BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO left_join_by_price
SELECT A.id, A.reserve, B.auction
FROM auction AS A LEFT JOIN bid AS B ON A.reserve = B.price;
