-- Generational claim keys (docs/scaling.md#design-generational-claim-keys),
-- run with search_path gen<G>,public and -D g=<G>. The key's advisory lock
-- rides on the replay record's insert, as in weekly.sql: it closes the race
-- at a generation's boundary. The claim statement, which runs after it, takes
-- both its snapshot and its generation (floor(day / G) of the statement's
-- start) once the lock is held, so it sees a first claim of the key that was
-- in flight in the previous generation, and a claim that waited for the lock
-- never lands in an older generation than the one it waited for. The key goes
-- into the current generation (its own primary key decides a duplicate
-- there) only if the previous generation does not hold it (a probe pruned to
-- that one partition); the claim, with its body, goes into today's partition
-- of claims_by_day only if the key went in.
\set n random(1, 2000000000)
BEGIN;
INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, expires_at, signed_at)
  SELECT 'pgbench', 'pgbench', md5(:n::text || ':' || :client_id || random()::text), 0, (extract(epoch from now()) * 1000)::bigint
  WHERE pg_advisory_xact_lock(hashtextextended('pgbench/pgbench/' || md5(:n::text || ':' || :client_id), 0)) IS NOT NULL
  ON CONFLICT DO NOTHING;
WITH k AS (
  INSERT INTO claim_keys (tenant_id, endpoint_id, event_id, generation, claim_day, keep_until)
    SELECT 'pgbench', 'pgbench', md5(:n::text || ':' || :client_id), floor(extract(epoch from statement_timestamp())
           / 86400)::int / :g, floor(extract(epoch from now()) / 86400), (extract(epoch from now()) * 1000)::bigint
           + 30 * 86400000::bigint
    WHERE NOT EXISTS (SELECT 1 FROM claim_keys p WHERE p.tenant_id = 'pgbench' AND p.endpoint_id = 'pgbench'
                      AND p.event_id = md5(:n::text || ':' || :client_id)
                      AND p.generation = floor(extract(epoch from statement_timestamp()) / 86400)::int / :g - 1)
    ON CONFLICT DO NOTHING RETURNING event_id)
INSERT INTO claims_by_day (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at,
                           body_ciphertext, kek_version)
  SELECT 'pgbench', 'pgbench', event_id, md5(random()::text), 'reminder.created', 'key',
         'applied', (extract(epoch from now()) * 1000)::bigint, decode(repeat('ab', 1057), 'hex'), 1
  FROM k;
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
COMMIT;
