-- Nexmark q6: average selling price by seller (OVER window).
USE nexmark;

CREATE TEMPORARY TABLE nexmark_q6 (
  seller BIGINT,
  avg_price DOUBLE
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q6
SELECT
    Q.seller,
    AVG(Q.price) OVER
        (PARTITION BY Q.seller ORDER BY Q.`dateTime` ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg_price
FROM (
    SELECT * FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY id, seller ORDER BY price DESC) AS rownum
        FROM (SELECT A.id, A.seller, B.price, B.`dateTime`
            FROM auction AS A,
                bid AS B
            WHERE A.id = B.auction
                and B.`dateTime` between A.`dateTime` and A.expires)
    )
    WHERE rownum <= 1
) AS Q;
