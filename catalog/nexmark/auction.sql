CREATE VIEW auction AS
SELECT auction.id, auction.itemName, auction.description, auction.initialBid, auction.reserve,
       `dateTime`, auction.expires, auction.seller, auction.category, auction.extra
FROM events WHERE event_type = 1;
