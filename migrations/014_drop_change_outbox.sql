-- change_outbox goes, with what only it used: the trigger and function of 003 that copied
-- its rows into change_log, its revision column (003) and its xid column (006). Nothing has
-- written or read it since 007: every publishing write records its change itself
-- (record_change(), 007), and the catch-up reads change_log. 007 kept the table for nodes of
-- the version before it, during a rolling upgrade (they still wrote outbox rows, and moved
-- their horizon by the outbox's xids); such a node cannot run beside this one: a deployment
-- still on a version before 007 moves to one with 007 to 012 on every node first.
-- change_log and change_log_pruned (003) stay: the catch-up and the prune read them.

DROP TRIGGER change_outbox_logged ON change_outbox;
DROP FUNCTION change_outbox_logged();
DROP TABLE change_outbox;
