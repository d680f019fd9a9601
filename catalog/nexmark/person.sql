CREATE VIEW person AS
SELECT person.id, person.name, person.emailAddress, person.creditCard, person.city, person.state,
       `dateTime`, person.extra
FROM events WHERE event_type = 0;
