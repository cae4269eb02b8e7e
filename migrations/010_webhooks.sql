-- Webhooks: a company's endpoints, and the queue of what each must still receive.
--
-- A delivery row is written by a trigger on `event`, in the transaction that writes the event
-- (and so its change): an event that commits has its deliveries, one that rolls back has none,
-- and no node can lose one between the two. The write itself only inserts rows; sending is
-- the nodes' background work (src/webhooks/), which takes rows with FOR UPDATE SKIP LOCKED.
--
--   webhook.secret:   `whsec_` + base64 of 32 random bytes. Kept as it is, not hashed: the
--                     sender needs it to sign (as gateway_secret keeps its keys). Shown once,
--                     at creation; never listed, logged or written into an event.
--   webhook.types:    the event types it receives; NULL: every type
--   webhook.lease_*:  the node sending to this endpoint now, and until when (one sender per
--                     endpoint at a time, so each attempt is made by one node, in event order)
CREATE TABLE webhook (
  id            uuid PRIMARY KEY,
  company_id    uuid NOT NULL REFERENCES company (id),
  url           text NOT NULL,
  types         text[] NULL,
  secret        text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  lease_owner   text NULL,
  lease_until   timestamptz NULL
);
CREATE INDEX webhook_company_idx ON webhook (company_id, created_at);

-- One row per (endpoint, event). `payload` is the event's body as sent, fixed at enqueue: the
-- event may be pruned (EVENT_RETENTION_DAYS) before the last retry.
--   attempts:        attempts made so far
--   next_attempt_at: when the next attempt is due; NULL once delivered or given up
--   last_status:     the HTTP status of the last attempt; NULL when none came (timeout, refused)
--   last_error:      why the last attempt failed (no secret, no body), NULL after a 2xx
CREATE TABLE webhook_delivery (
  id              bigserial PRIMARY KEY,
  webhook_id      uuid NOT NULL REFERENCES webhook (id) ON DELETE CASCADE,
  event_id        bigint NOT NULL,
  event_type      text NOT NULL,
  payload         jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NULL DEFAULT now(),
  last_attempt_at timestamptz NULL,
  last_status     integer NULL,
  last_error      text NULL,
  delivered_at    timestamptz NULL
);
CREATE INDEX webhook_delivery_due_idx ON webhook_delivery (webhook_id, event_id) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_delivery_listing_idx ON webhook_delivery (webhook_id, id DESC);
CREATE INDEX webhook_delivery_done_idx ON webhook_delivery (created_at) WHERE next_attempt_at IS NULL;

-- `at` as JavaScript writes it (toISOString), so the payload reads like the events listing.
CREATE FUNCTION enqueue_webhook_deliveries() RETURNS trigger AS $$
BEGIN
  INSERT INTO webhook_delivery (webhook_id, event_id, event_type, payload)
  SELECT w.id, NEW.id, NEW.type, jsonb_build_object(
           'id', NEW.id::text,
           'type', NEW.type,
           'at', to_char(NEW.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
           'companyId', NEW.company_id::text,
           'actor', NEW.actor,
           'subject', NEW.subject,
           'detail', NEW.detail)
  FROM webhook w
  WHERE w.company_id = NEW.company_id AND (w.types IS NULL OR NEW.type = ANY (w.types));
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER event_webhook_deliveries AFTER INSERT ON event FOR EACH ROW EXECUTE FUNCTION enqueue_webhook_deliveries();
