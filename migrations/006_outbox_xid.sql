-- The transaction that wrote each change_outbox row, so a node may move its catch-up horizon
-- forward while it is subscribed (bus/catch-up.ts): no transaction below min(xid) of the
-- outbox still has a change whose publish was not confirmed. Rows written before this
-- migration have no xid (NULL): while any is left, the horizon does not move (the relay
-- republishes and deletes them soon). 005 is taken by the events table (issue 12).

ALTER TABLE change_outbox ADD COLUMN xid xid8 NULL;
ALTER TABLE change_outbox ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
