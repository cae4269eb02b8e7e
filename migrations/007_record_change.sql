-- One way to record a change: record_change() writes the change's change_log row (what a
-- node catches up from) and, when it has one, its audit event, and every publishing write
-- calls it from its own statement:
--
--   WITH changed AS (UPDATE … RETURNING …)
--   SELECT changed.*, record_change(kind, key, revision, company_id, event_type, actor, subject, detail) FROM changed
--
-- Why this shape: the change, its change_log row and its event commit together or not at
-- all (one statement, one transaction); the write stays one round trip to the database; and
-- each statement's SQL is a fixed string instead of CTEs assembled per write. A function in
-- the select list of a plain SELECT runs once per row the data-modifying CTE returned: never
-- when the write matched nothing, once for each row it changed (test/store/change-log.test.ts
-- shows both, and the rollback, on PostgreSQL and PGlite). plpgsql, not SQL: its plans are
-- kept for the session, where a SQL function's are made again on every call.
--
-- change_outbox is no longer written: a node learns of a change whose publish failed from
-- the catch-up it runs from the change log while subscribed. The table and its trigger stay
-- while nodes of the previous version may run beside these (a rolling upgrade): they still
-- write outbox rows, and the trigger logs their changes into change_log, which these read.
--   kind, key, revision: as in change_log (003)
--   event_type:          the event's type (005), or NULL when the change has no event (a
--                        repeated revocation, an unchanged flag, a new agent for a user)
--   actor, subject, detail: as in event (005); detail NULL is {}

CREATE FUNCTION record_event(company_id uuid, event_type text, actor jsonb, subject jsonb, detail jsonb) RETURNS void AS $$
BEGIN
  INSERT INTO event (company_id, type, actor, subject, detail) VALUES (company_id, event_type, actor, subject, COALESCE(detail, '{}'::jsonb));
END
$$ LANGUAGE plpgsql;

CREATE FUNCTION record_change(kind text, key text, revision bigint, company_id uuid, event_type text, actor jsonb, subject jsonb, detail jsonb) RETURNS void AS $$
BEGIN
  INSERT INTO change_log (kind, key, revision) VALUES (kind, key, revision);
  IF event_type IS NOT NULL THEN
    PERFORM record_event(company_id, event_type, actor, subject, detail);
  END IF;
END
$$ LANGUAGE plpgsql;

-- Nodes of the previous version move their catch-up horizon forward while subscribed past
-- every transaction below the smallest xid of an outbox row (006). These nodes' changes leave
-- no outbox row, so such a horizon could pass one of them whose publish failed, and the old
-- node would never read it. Old nodes hold their horizon while any outbox row has no xid
-- (written before 006), and their relay leaves a row of a kind it does not know in place
-- for a newer node (which never deletes it). So one such row holds every old node's horizon
-- where it is: they then catch up only on a new subscription, as before 006, which is safe.
-- A later release drops change_outbox, this row with it. The row needs what 002/003/006 ask:
-- a kind and a key (NOT NULL), revision and xid NULL; its id and created_at are defaulted.
-- Its insert fires the trigger of 003, which logs it into change_log: that row is deleted at
-- once (no reader sees it: same transaction), since no node could apply a change of that kind.
INSERT INTO change_outbox (kind, key, revision, xid) VALUES ('horizon-hold', '007_record_change', NULL, NULL);
DELETE FROM change_log WHERE kind = 'horizon-hold';
