-- The transactional outbox of published changes. Every write whose change must reach the
-- caches of every node inserts one row here in the same statement as the change itself, so
-- the commit and the row are atomic. The writer deletes the row once the bus confirmed the
-- publish; a row left behind (the publish failed, or the writer died between commit and
-- publish) is picked up by the relay of any node, which republishes the row's CURRENT
-- state (revisions only grow, so that is always safe) and then deletes it.
--   kind: 'user' | 'agent' | 'apiKey'
--   key:  the id of the changed row (customer_user.id, agent.id, api_key.key_id)

CREATE TABLE change_outbox (
  id         bigserial PRIMARY KEY,
  kind       text NOT NULL,
  key        text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX change_outbox_created_at_idx ON change_outbox (created_at);
