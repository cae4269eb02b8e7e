-- SPEC §7.3 "One company never slows another", for new users: each one is a customer_user
-- row in the shared store and an entry in every node's shared user cache, so a company may
-- create them only at a rate (a bucket of NEW_USERS_BURST, refilled at
-- NEW_USERS_PER_MINUTE) and hold at most MAX_USERS_PER_COMPANY of them.
--
-- company.user_count is kept by triggers on customer_user, as 008 keeps
-- live_token_revocations and for the same reason: every insert and delete moves it,
-- whoever runs it (a node of the previous version during a rolling upgrade creates users
-- without knowing the column), so the count never drifts from the rows.
-- company.new_user_allowance is the bucket: how many new users the company may still create
-- at once, as of new_user_allowance_at (NULL: full, a company that never created one).
-- Both are read and written by create_customer_user() below, under the company row's lock.

-- Inserts and deletes wait until the count below is in and the triggers are in place (and
-- this waits for those under way), so that no row is counted twice or missed. The same
-- order as an insert's own locks (customer_user, then company for its foreign key).
LOCK TABLE customer_user IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE company
  ADD COLUMN user_count integer NOT NULL DEFAULT 0 CHECK (user_count >= 0),
  ADD COLUMN new_user_allowance double precision NULL,
  ADD COLUMN new_user_allowance_at timestamptz NULL;
UPDATE company SET user_count = counted.n
FROM (SELECT company_id, count(*) AS n FROM customer_user GROUP BY company_id) AS counted
WHERE company.id = counted.company_id;

CREATE FUNCTION customer_users_added() RETURNS trigger AS $$
BEGIN
  UPDATE company SET user_count = user_count + added.n
  FROM (SELECT company_id, count(*) AS n FROM added_rows GROUP BY company_id) AS added
  WHERE company.id = added.company_id;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE FUNCTION customer_users_removed() RETURNS trigger AS $$
BEGIN
  -- Companies locked in one order: two deletes spanning the same companies cannot deadlock here.
  PERFORM 1 FROM company WHERE id IN (SELECT company_id FROM removed_rows) ORDER BY id FOR NO KEY UPDATE;
  UPDATE company SET user_count = user_count - removed.n
  FROM (SELECT company_id, count(*) AS n FROM removed_rows GROUP BY company_id) AS removed
  WHERE company.id = removed.company_id;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE FUNCTION customer_users_truncated() RETURNS trigger AS $$
BEGIN
  UPDATE company SET user_count = 0 WHERE user_count <> 0;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER customer_users_added AFTER INSERT ON customer_user
  REFERENCING NEW TABLE AS added_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_users_added();
CREATE TRIGGER customer_users_removed AFTER DELETE ON customer_user
  REFERENCING OLD TABLE AS removed_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_users_removed();
CREATE TRIGGER customer_users_truncated AFTER TRUNCATE ON customer_user
  FOR EACH STATEMENT EXECUTE FUNCTION customer_users_truncated();
-- A user never moves to another company (no statement updates company_id): no UPDATE trigger.

-- The new users a company may create at once at `as_of`: the allowance stored at `stored_at`,
-- refilled at per_minute since then, at most burst (a lowered burst applies at once). One
-- formula for the check below and for the admin's usage read (store/companies.ts).
CREATE FUNCTION new_user_allowance(stored double precision, stored_at timestamptz, as_of timestamptz, burst integer, per_minute integer)
RETURNS double precision AS $$
  SELECT CASE WHEN stored IS NULL THEN burst::double precision
    ELSE least(burst::double precision, stored + greatest(0, extract(epoch FROM as_of - stored_at)::double precision) * per_minute / 60.0) END
$$ LANGUAGE sql IMMUTABLE;

-- Creates the customer user (company, external id) for a token (SPEC §3.1 step 4) unless a
-- limit refuses it. One call is one round trip and one transaction; it returns one row:
--   outcome 'created':    created now, with the requested agent or the company's default,
--           'exists':     the user was there already (created meanwhile by another request
--                         or node): that user, never refused by a limit,
--           'no-agent':   no agent given and the company has no default one,
--           'user-limit': the company holds max_users users,
--           'rate-limit': the company's allowance is below one new user; retry_after is
--                         the seconds until it is not,
-- (the user's columns NULL but for 'created' and 'exists'; nothing written but for
-- 'created'), and no row when the company does not exist.
-- Why plpgsql and why the lock: the count and the allowance are one row that every new user
-- of the company reads and writes, so its creations take turns on that row's lock (held to
-- commit); each statement after it sees what the previous holder committed, the user it
-- may have created included. Only a new user pays this: the token path finds existing users
-- without calling it (auth/issue-token.ts). Refusing writes nothing, so a refused storm
-- spends no allowance.
CREATE FUNCTION create_customer_user(new_id uuid, owner_id uuid, wanted_external_id text, wanted_agent_id uuid, burst integer, per_minute integer, max_users integer)
RETURNS TABLE (outcome text, retry_after integer, id uuid, company_id uuid, external_id text, agent_id uuid, token_version integer, active boolean, revision bigint, created_at timestamptz, updated_at timestamptz) AS $$
DECLARE
  users integer;
  stored double precision;
  stored_at timestamptz;
  chosen_agent_id uuid;
  now_at timestamptz;
  available double precision;
  created customer_user%ROWTYPE;
BEGIN
  -- FOR NO KEY UPDATE: the lock an UPDATE of the row takes; it lets other transactions
  -- insert rows that reference the company (agents, events, users of an older node).
  SELECT c.user_count, c.new_user_allowance, c.new_user_allowance_at, COALESCE(wanted_agent_id, c.default_agent_id)
  INTO users, stored, stored_at, chosen_agent_id
  FROM company AS c WHERE c.id = owner_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT 'exists'::text, NULL::integer, u.id, u.company_id, u.external_id, u.agent_id, u.token_version, u.active, u.revision, u.created_at, u.updated_at
  FROM customer_user AS u WHERE u.company_id = owner_id AND u.external_id = wanted_external_id;
  IF FOUND THEN
    RETURN;
  END IF;
  IF chosen_agent_id IS NULL THEN
    RETURN QUERY SELECT 'no-agent'::text, NULL::integer, NULL::uuid, NULL::uuid, NULL::text, NULL::uuid, NULL::integer, NULL::boolean, NULL::bigint, NULL::timestamptz, NULL::timestamptz;
    RETURN;
  END IF;
  -- The total first: waiting does not help there.
  IF users >= max_users THEN
    RETURN QUERY SELECT 'user-limit'::text, NULL::integer, NULL::uuid, NULL::uuid, NULL::text, NULL::uuid, NULL::integer, NULL::boolean, NULL::bigint, NULL::timestamptz, NULL::timestamptz;
    RETURN;
  END IF;
  -- The clock now, once the lock is held (not the transaction's start): the previous holder
  -- stored its own reading, and greatest(0, …) in new_user_allowance covers a clock step back.
  now_at := clock_timestamp();
  available := new_user_allowance(stored, stored_at, now_at, burst, per_minute);
  IF available < 1 THEN
    RETURN QUERY SELECT 'rate-limit'::text, ceil((1 - available) * 60.0 / per_minute)::integer, NULL::uuid, NULL::uuid, NULL::text, NULL::uuid, NULL::integer, NULL::boolean, NULL::bigint, NULL::timestamptz, NULL::timestamptz;
    RETURN;
  END IF;
  -- ON CONFLICT: a node of the previous version creates users without the company's lock
  -- (the same new user asked of both at once may then deadlock, the old node's trigger
  -- waiting for this lock: PostgreSQL ends one, whose request fails and may be retried; only
  -- while the two versions run side by side, as with 008's revoke_token()).
  INSERT INTO customer_user AS u (id, company_id, external_id, agent_id) VALUES (new_id, owner_id, wanted_external_id, chosen_agent_id)
  ON CONFLICT ON CONSTRAINT customer_user_company_external_uq DO NOTHING
  RETURNING u.* INTO created;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'exists'::text, NULL::integer, u.id, u.company_id, u.external_id, u.agent_id, u.token_version, u.active, u.revision, u.created_at, u.updated_at
    FROM customer_user AS u WHERE u.company_id = owner_id AND u.external_id = wanted_external_id;
    RETURN;
  END IF;
  UPDATE company AS c SET new_user_allowance = available - 1, new_user_allowance_at = now_at WHERE c.id = owner_id;
  RETURN QUERY SELECT 'created'::text, NULL::integer, created.id, created.company_id, created.external_id, created.agent_id, created.token_version, created.active, created.revision, created.created_at, created.updated_at;
END
$$ LANGUAGE plpgsql;
