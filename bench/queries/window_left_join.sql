-- Every bid with the auction it bids on when that auction opened in the same 10-second
-- window, NULL where it did not (a LEFT window join: streamsql's window join operator on
-- transformWithStateInPandas; each window joined once, when the watermark passes its end).
USE nexmark;

CREATE TEMPORARY TABLE window_left_join (
  auction BIGINT,
  price BIGINT,
  seller BIGINT,
  window_start TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

INSERT INTO window_left_join
SELECT B.auction, B.price, A.seller, B.window_start
FROM (SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) B
LEFT JOIN (SELECT * FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) A
ON B.auction = A.id AND B.window_start = A.window_start AND B.window_end = A.window_end;
