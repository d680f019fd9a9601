-- Every bid with the auction it bids on when that auction opened in the same 10-second
-- window (an inner window join of two TVFs: Spark's own stream-stream join, the reference
-- for window_left_join, which runs on streamsql's window join operator).
USE nexmark;

CREATE TEMPORARY TABLE window_join (
  auction BIGINT,
  price BIGINT,
  seller BIGINT,
  window_start TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

INSERT INTO window_join
SELECT B.auction, B.price, A.seller, B.window_start
FROM (SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) B
JOIN (SELECT * FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) A
ON B.auction = A.id AND B.window_start = A.window_start AND B.window_end = A.window_end;
