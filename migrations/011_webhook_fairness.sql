-- Webhooks: one company's slow or dead endpoints never delay another company's deliveries
-- (SPEC §7.3, §9.3; src/webhooks/worker.ts, src/store/webhooks.ts).
--
--   webhook.unanswered:    attempts in a row that got no answer (a timeout, a refused or
--                          failed connection, a refused destination); 0 after any answer
--   webhook.paused_until:  after such an attempt the endpoint as a whole is not claimed
--                          until then (the retry schedule, counted by `unanswered`): its other
--                          queued deliveries wait with it instead of each holding a sending
--                          slot for a timeout of its own
--
-- The claim orders an endpoint by its oldest due delivery: the index answers that minimum,
-- and whether anything is due, with one probe per endpoint, however long its backlog.
ALTER TABLE webhook
  ADD COLUMN unanswered   integer NOT NULL DEFAULT 0,
  ADD COLUMN paused_until timestamptz NULL;

CREATE INDEX webhook_delivery_next_idx ON webhook_delivery (webhook_id, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
