-- Wider revocation (one token, a whole company, one agent).
--
-- Company and agent revocations are generations, not times: a token carries, in private
-- claims, the generation its company and its agent had when it was signed, and is revoked
-- once either has grown past it. A token signed after a revocation answered reads the new
-- generation (every node applied it before the answer), so it is valid even in the same
-- second; no clock of one machine is compared with the clock of another.
--   tokens_generation: grows by one on every revoke-tokens call, never decreases;
--   tokens_revoked_at: when the last one happened (answered as revokedAt);
--   company.revision:  the order of changes of the row, for caches (as on agent).
ALTER TABLE company ADD COLUMN tokens_generation integer NOT NULL DEFAULT 0 CHECK (tokens_generation >= 0);
ALTER TABLE company ADD COLUMN tokens_revoked_at timestamptz NULL;
ALTER TABLE company ADD COLUMN revision bigint NOT NULL DEFAULT 0;
ALTER TABLE agent ADD COLUMN tokens_generation integer NOT NULL DEFAULT 0 CHECK (tokens_generation >= 0);
ALTER TABLE agent ADD COLUMN tokens_revoked_at timestamptz NULL;

-- One revoked token, by its jti, kept until the token itself expires (then pruned).
CREATE TABLE revoked_token (
  jti        text PRIMARY KEY,
  company_id uuid NOT NULL REFERENCES company (id),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX revoked_token_expires_at_idx ON revoked_token (expires_at);
