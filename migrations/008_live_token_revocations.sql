-- How many live single-token revocations (rows of revoked_token) each company holds, so
-- that revoke-token can refuse one past MAX_LIVE_TOKEN_REVOCATIONS without counting rows.
--
-- company.live_token_revocations is kept by triggers on revoked_token, not by the
-- statements that write it: every insert and delete moves it, whoever runs it — a node of
-- the previous version during a rolling upgrade (its revoke-token inserts and its
-- housekeeping prunes, neither of which knows the column), or an operator's DELETE. Kept by
-- the writers alone, one old node's prune would leave the count above the rows for good.
-- The triggers are per statement, on the rows the statement changed: a prune of many rows
-- is one UPDATE per company, not one per row.
--
-- The check against the limit is revoke_token() below: it takes the company row's lock
-- first, so the first revocations of one company take turns and none overshoots.

-- Inserts and deletes wait until the count below is in and the triggers are in place (and
-- this waits for those under way), so that no row is counted twice or missed. The same
-- order as a revocation's own locks (revoked_token, then company): no deadlock with one.
LOCK TABLE revoked_token IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE company ADD COLUMN live_token_revocations integer NOT NULL DEFAULT 0 CHECK (live_token_revocations >= 0);
UPDATE company SET live_token_revocations = counted.n
FROM (SELECT company_id, count(*) AS n FROM revoked_token GROUP BY company_id) AS counted
WHERE company.id = counted.company_id;

CREATE FUNCTION revoked_tokens_added() RETURNS trigger AS $$
BEGIN
  UPDATE company SET live_token_revocations = live_token_revocations + added.n
  FROM (SELECT company_id, count(*) AS n FROM added_rows GROUP BY company_id) AS added
  WHERE company.id = added.company_id;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE FUNCTION revoked_tokens_removed() RETURNS trigger AS $$
BEGIN
  -- Companies locked in one order: two nodes' prunes of the same rounds cannot deadlock here.
  PERFORM 1 FROM company WHERE id IN (SELECT company_id FROM removed_rows) ORDER BY id FOR NO KEY UPDATE;
  UPDATE company SET live_token_revocations = live_token_revocations - removed.n
  FROM (SELECT company_id, count(*) AS n FROM removed_rows GROUP BY company_id) AS removed
  WHERE company.id = removed.company_id;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE FUNCTION revoked_tokens_truncated() RETURNS trigger AS $$
BEGIN
  UPDATE company SET live_token_revocations = 0 WHERE live_token_revocations <> 0;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER revoked_tokens_added AFTER INSERT ON revoked_token
  REFERENCING NEW TABLE AS added_rows FOR EACH STATEMENT EXECUTE FUNCTION revoked_tokens_added();
CREATE TRIGGER revoked_tokens_removed AFTER DELETE ON revoked_token
  REFERENCING OLD TABLE AS removed_rows FOR EACH STATEMENT EXECUTE FUNCTION revoked_tokens_removed();
CREATE TRIGGER revoked_tokens_truncated AFTER TRUNCATE ON revoked_token
  FOR EACH STATEMENT EXECUTE FUNCTION revoked_tokens_truncated();
-- A row never moves to another company (revoke_token() writes company_id once; no
-- statement updates it): no UPDATE trigger.

-- Revokes one token (SPEC §7.1) unless that would take its company past max_live live
-- revocations. One call is one round trip and one transaction, with its change recorded by
-- record_change() (007) as every publishing write does; it returns one row
--   outcome 'first':  revoked now (event token.revoked),
--           'repeat': already revoked (recorded without an event, and announced again),
--           'limit':  refused, nothing written (the row's other columns are NULL),
--           'expired': expired more than grace_seconds ago by this server's clock (the
--                      prune's rule): nothing written (the other columns are NULL),
-- and no row when the company does not exist.
-- Why plpgsql and not one statement: a statement sees the rows committed before it began,
-- so after waiting for the company's lock it could miss a revocation of the same jti
-- committed meanwhile, and refuse that repeat as if it were a new one. In a plpgsql
-- function each statement sees what was committed before it runs: once the lock is held,
-- the repeat is found. Every first revocation holds that lock until it commits, so none of
-- the same company commits between the check and the insert.
CREATE FUNCTION revoke_token(token_jti text, token_company_id uuid, token_expires_at timestamptz, max_live integer, user_id text, actor jsonb, grace_seconds double precision)
RETURNS TABLE (jti text, company_id uuid, expires_at timestamptz, outcome text) AS $$
DECLARE
  live integer;
  stored_jti text;
  stored_company_id uuid;
  stored_expires_at timestamptz;
  first boolean;
BEGIN
  -- Expired past the grace by this server's clock (the prune's rule): no node within
  -- MAX_CLOCK_SKEW accepts the token any more, and the prune would drop the row at once.
  IF token_expires_at <= now() - grace_seconds * interval '1 second' THEN
    RETURN QUERY SELECT NULL::text, NULL::uuid, NULL::timestamptz, 'expired'::text;
    RETURN;
  END IF;
  -- FOR NO KEY UPDATE: the lock an UPDATE of the row takes; it lets other transactions
  -- insert rows that reference the company (agents, users, events).
  SELECT c.live_token_revocations INTO live FROM company AS c WHERE c.id = token_company_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  -- A repeat writes no row, so it never waits for a prune that deletes this row (and that
  -- waits for the company's lock to lower the count).
  SELECT r.jti, r.company_id, r.expires_at, false INTO stored_jti, stored_company_id, stored_expires_at, first
  FROM revoked_token AS r WHERE r.jti = token_jti;
  IF NOT FOUND THEN
    IF live >= max_live THEN
      RETURN QUERY SELECT NULL::text, NULL::uuid, NULL::timestamptz, 'limit'::text;
      RETURN;
    END IF;
    -- ON CONFLICT: a node of the previous version inserts without taking the company's lock.
    INSERT INTO revoked_token AS r (jti, company_id, expires_at) VALUES (token_jti, token_company_id, token_expires_at)
    ON CONFLICT ON CONSTRAINT revoked_token_pkey DO UPDATE SET jti = EXCLUDED.jti
    RETURNING r.jti, r.company_id, r.expires_at, (r.xmax = 0) INTO stored_jti, stored_company_id, stored_expires_at, first;
  END IF;
  PERFORM record_change('token', stored_jti, extract(epoch FROM stored_expires_at)::bigint, stored_company_id, CASE WHEN first THEN 'token.revoked' END, actor,
    jsonb_build_object('kind', 'token', 'jti', stored_jti),
    jsonb_build_object('userId', user_id, 'expiresAt', to_char(stored_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')));
  RETURN QUERY SELECT stored_jti, stored_company_id, stored_expires_at, CASE WHEN first THEN 'first' ELSE 'repeat' END;
END
$$ LANGUAGE plpgsql;
