-- The audit trail: one row per change, written by the same statement as the change itself,
-- so there is no change without its event and no event without its change. Never a secret:
-- actor names an API key by its public keyId, or the admin; subject and detail carry ids,
-- versions and times only.
--   type:    tokens.invalidated | token.revoked | company.tokens_revoked | agent.tokens_revoked |
--            user.activated | user.deactivated | agent.activated | agent.deactivated |
--            api_key.created | api_key.revoked
--   actor:   {"kind": "apiKey", "keyId": …} | {"kind": "admin"}
--   subject: {"kind": "user" | "agent" | "company" | "apiKey" | "token", "id" | "keyId" | "jti": …}
-- Listed newest first per company, by id (the cursor); pruned by age (EVENT_RETENTION_DAYS).
CREATE TABLE event (
  id         bigserial PRIMARY KEY,
  company_id uuid NOT NULL REFERENCES company (id),
  type       text NOT NULL,
  at         timestamptz NOT NULL DEFAULT now(),
  actor      jsonb NOT NULL,
  subject    jsonb NOT NULL,
  detail     jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX event_company_id_idx ON event (company_id, id DESC);
CREATE INDEX event_at_idx ON event (at);
