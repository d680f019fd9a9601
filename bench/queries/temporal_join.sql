-- Every bid with its bidder's name as of the bid's time (an event-time temporal join into
-- person, versioned by its id: streamsql's temporal join operator; NULL before the person).
USE nexmark;

CREATE TEMPORARY TABLE person_versions (PRIMARY KEY (id) NOT ENFORCED) LIKE person;

CREATE TEMPORARY TABLE temporal_join (
  auction BIGINT,
  price BIGINT,
  name VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO temporal_join
SELECT B.auction, B.price, P.name
FROM bid AS B LEFT JOIN person_versions FOR SYSTEM_TIME AS OF B.`dateTime` AS P ON B.bidder = P.id;
