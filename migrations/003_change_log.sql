-- The durable record of changes a node reads back after its invalidation channel was lost
-- (a Redis restart, failover or network blip), so that it keeps every cache entry that did
-- not change instead of flushing them all. One row per change_outbox row, written by a
-- trigger in the same statement (so every publishing write, of any kind, is recorded, and
-- atomically with its change); unlike the outbox, rows stay until pruned by age.
--
-- Commit order: a number taken inside a transaction (a bigserial, or the xid itself) is
-- not commit order — a transaction may take a smaller one and commit after a reader has
-- read past it. So a reader never asks for "everything after the last row I saw": it asks
-- for every row whose transaction id is at or above the xmin of the snapshot of its
-- previous read (pg_snapshot_xmin(pg_current_snapshot())): every transaction below that
-- xmin had finished when that read ran, so whatever committed after it has an xid at or
-- above it.
--   kind, key:  as in change_outbox (the changed row)
--   revision:   the row's revision after the change when the writer has one, else NULL
--               (the reader then evicts whatever it holds of the row)

ALTER TABLE change_outbox ADD COLUMN revision bigint NULL;

CREATE TABLE change_log (
  xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
  kind       text NOT NULL,
  key        text NOT NULL,
  revision   bigint NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX change_log_xid_idx ON change_log (xid);
CREATE INDEX change_log_created_at_idx ON change_log (created_at);

-- Rows are pruned by age; `through` is the highest transaction id pruned so far, so a reader
-- whose horizon is not above it knows rows it needs may be gone (it then flushes instead).
-- At most one row; none until the first prune.
CREATE TABLE change_log_pruned (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  through  xid8 NOT NULL
);

CREATE FUNCTION change_outbox_logged() RETURNS trigger AS $$
BEGIN
  INSERT INTO change_log (kind, key, revision) VALUES (NEW.kind, NEW.key, NEW.revision);
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER change_outbox_logged
  AFTER INSERT ON change_outbox
  FOR EACH ROW EXECUTE FUNCTION change_outbox_logged();
