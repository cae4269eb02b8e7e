-- Operators with names and roles, and the console's sessions (SPEC §10.1, §10.3).
--
--   operator.token_hash:   SHA-256 of the operator's token (`opt_` + 43 base64url characters),
--                          as an API key's secret is kept; the token itself is shown once
--   operator.role:         viewer | operator | admin (src/routes/admin/roles.ts says what each may call)
--   operator.revoked_at:   set once, for good: the token is refused on every node from the
--                          commit on (every request looks the operator up: no cache)
--   operator.last_used_at: written at most once a minute per operator
CREATE TABLE operator (
  id           uuid PRIMARY KEY,
  name         text NOT NULL,
  role         text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
  token_hash   bytea NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz NULL,
  last_used_at timestamptz NULL
);

-- A console sign-in: the cookie holds 32 random bytes, the row their SHA-256 (a copy of the
-- table does not open anyone's session). Live while not ended, seen within the idle timeout
-- (CONSOLE_SESSION_IDLE) and younger than 12 h, by the database's clock, and while its
-- operator is not revoked; read on every request, so an end is seen on every node at once.
--   operator_id:      NULL for a session opened with ADMIN_TOKEN
--   admin_token_hash: for those, SHA-256 of that token: a node whose ADMIN_TOKEN differs
--                     (it was rotated) does not honour the session
--   csrf:             the anti-CSRF token every write from the console must carry
CREATE TABLE console_session (
  id_hash          bytea PRIMARY KEY,
  operator_id      uuid NULL REFERENCES operator (id),
  admin_token_hash bytea NULL,
  csrf             text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  last_seen_at     timestamptz NOT NULL DEFAULT now(),
  ended_at         timestamptz NULL,
  CHECK ((operator_id IS NULL) <> (admin_token_hash IS NULL))
);
CREATE INDEX console_session_operator_idx ON console_session (operator_id) WHERE ended_at IS NULL;
CREATE INDEX console_session_created_idx ON console_session (created_at);

-- The companies search pages by (name, id); an agent's revocation preview counts its users.
CREATE INDEX company_name_idx ON company (name, id);
CREATE INDEX customer_user_agent_idx ON customer_user (agent_id) WHERE active;
