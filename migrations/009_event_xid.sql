-- Reading events in commit order (the event stream's resume, the listing's pages). An event's
-- id is taken inside its transaction, so two writes can commit out of id order: a reader
-- that asks for "ids after the last one I saw" can skip one for good. As for change_log (003),
-- the cursor is instead the snapshot of a read (pg_current_snapshot()): the events a later
-- read must return are exactly those whose transaction that snapshot did not see,
--   xid >= pg_snapshot_xmin(cursor) AND NOT pg_visible_in_snapshot(xid, cursor)
-- whatever their ids. Existing rows take this migration's transaction id: every reader's
-- cursor is newer than it, so none of them is returned again.
--   xid: the transaction that wrote the event (and its change)
ALTER TABLE event ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX event_company_xid_idx ON event (company_id, xid);

-- Events are pruned by age (EVENT_RETENTION_DAYS); `through` is the highest transaction id
-- pruned so far, so a cursor whose xmin is not above it may need rows that are gone: the
-- stream then sends `reset` instead of a gap. At most one row; none until the first prune.
CREATE TABLE event_pruned (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  through  xid8 NOT NULL
);
