-- The schema of SPEC §2, plus two columns the service needs for itself:
--   revision: grows by one on every change of a row, so that caches on many nodes can
--             order changes that reach them out of order (highest revision wins);
--   gateway_secret: key material the service generates once and keeps (the default
--             HS256 signing key when none is configured).

CREATE TABLE company (
  id               uuid PRIMARY KEY,
  name             text NOT NULL,
  default_agent_id uuid NULL,
  created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agent (
  id         uuid PRIMARY KEY,
  company_id uuid NOT NULL REFERENCES company (id),
  name       text NOT NULL,
  active     boolean NOT NULL DEFAULT true,
  revision   bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_company_idx ON agent (company_id);

ALTER TABLE company
  ADD CONSTRAINT company_default_agent_fk FOREIGN KEY (default_agent_id) REFERENCES agent (id);

CREATE TABLE api_key (
  key_id       text PRIMARY KEY,
  company_id   uuid NOT NULL REFERENCES company (id),
  secret_hash  bytea NOT NULL,
  name         text NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz NULL,
  last_used_at timestamptz NULL
);
CREATE INDEX api_key_company_idx ON api_key (company_id);

CREATE TABLE customer_user (
  id            uuid PRIMARY KEY,
  company_id    uuid NOT NULL REFERENCES company (id),
  external_id   text NOT NULL,
  agent_id      uuid NOT NULL REFERENCES agent (id),
  token_version integer NOT NULL DEFAULT 0 CHECK (token_version >= 0),
  active        boolean NOT NULL DEFAULT true,
  revision      bigint NOT NULL DEFAULT 0,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT customer_user_company_external_uq UNIQUE (company_id, external_id)
);

-- token_version never decreases, whatever writes the row.
CREATE FUNCTION customer_user_token_version_never_decreases() RETURNS trigger AS $$
BEGIN
  IF NEW.token_version < OLD.token_version THEN
    RAISE EXCEPTION 'token_version of customer_user % may not decrease (% -> %)', OLD.id, OLD.token_version, NEW.token_version;
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER customer_user_token_version_monotonic
  BEFORE UPDATE OF token_version ON customer_user
  FOR EACH ROW EXECUTE FUNCTION customer_user_token_version_never_decreases();

CREATE TABLE gateway_secret (
  name       text PRIMARY KEY,
  value      text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
