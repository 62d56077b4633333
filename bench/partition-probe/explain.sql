-- How many partitions each claim statement opens and locks, as prepared
-- statements after the plan cache has settled (seven executions first). Run by
-- run.sh with BENCH_EXPLAIN=1 after the setup, once per generation length
-- (search_path gen<G>,public; -v g=<G>).
-- Each EXPLAIN ANALYZE runs in a transaction that is rolled back, followed by
-- the relation locks the backend then holds (fastpath = in the backend's 16
-- slots; the others go to the shared lock table).
\set ON_ERROR_STOP 1
\pset footer off
CREATE TEMP VIEW held AS
  SELECT count(*) FILTER (WHERE fastpath) AS fastpath, count(*) FILTER (WHERE NOT fastpath) AS shared,
         string_agg(c.relname, ' ' ORDER BY c.relname) FILTER (WHERE c.relname ~ '^(claim|inbox)') AS claim_relations
  FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
  WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND c.relnamespace NOT IN ('pg_catalog'::regnamespace, pg_my_temp_schema());
SELECT floor(extract(epoch from now()) / 86400)::int / :g AS gen \gset
SELECT event_id AS old_key, claim_day AS old_day FROM claim_keys WHERE generation = :gen - 1 LIMIT 1 \gset

\echo '== the claim: key into the current generation unless the previous holds it, then the claim by day'
PREPARE claim(text, int) AS
WITH k AS (
  INSERT INTO claim_keys (tenant_id, endpoint_id, event_id, generation, claim_day, keep_until)
    SELECT 'pgbench', 'pgbench', $1, floor(extract(epoch from statement_timestamp()) / 86400)::int / $2,
           floor(extract(epoch from now()) / 86400), (extract(epoch from now()) * 1000)::bigint + 30 * 86400000::bigint
    WHERE NOT EXISTS (SELECT 1 FROM claim_keys p WHERE p.tenant_id = 'pgbench' AND p.endpoint_id = 'pgbench'
                      AND p.event_id = $1
                      AND p.generation = floor(extract(epoch from statement_timestamp()) / 86400)::int / $2 - 1)
    ON CONFLICT DO NOTHING RETURNING event_id)
INSERT INTO claims_by_day (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at,
                           body_ciphertext, kek_version)
  SELECT 'pgbench', 'pgbench', event_id, md5(random()::text), 'reminder.created', 'key',
         'applied', (extract(epoch from now()) * 1000)::bigint, decode(repeat('ab', 1057), 'hex'), 1
  FROM k;
BEGIN;
\o /dev/null
SELECT format('EXECUTE claim(%L, %s)', 'warm-' || i, :g) FROM generate_series(1, 7) i \gexec
\o
ROLLBACK;
BEGIN;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) EXECUTE claim(md5(random()::text), :g);
TABLE held;
ROLLBACK;
\echo '== the same claim, a retry of a key the previous generation holds'
BEGIN;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) EXECUTE claim(:'old_key', :g);
TABLE held;
ROLLBACK;

\echo '== the duplicate path: the key (two generations), then its claim (its one day)'
PREPARE dup_key(text, int) AS
  SELECT claim_day FROM claim_keys WHERE tenant_id = 'pgbench' AND endpoint_id = 'pgbench' AND event_id = $1
    AND generation IN ($2, $2 - 1) LIMIT 1;
PREPARE dup_claim(text, int) AS
  SELECT body_digest, outcome FROM claims_by_day WHERE tenant_id = 'pgbench' AND endpoint_id = 'pgbench'
    AND event_id = $1 AND received_at >= $2::bigint * 86400000 AND received_at < ($2::bigint + 1) * 86400000;
\o /dev/null
SELECT format('EXECUTE dup_key(%L, %s)', :'old_key', :gen) FROM generate_series(1, 7) \gexec
\o
\o /dev/null
SELECT format('EXECUTE dup_claim(%L, %s)', :'old_key', :old_day) FROM generate_series(1, 7) \gexec
\o
BEGIN;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) EXECUTE dup_key(:'old_key', :gen);
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) EXECUTE dup_claim(:'old_key', :old_day);
TABLE held;
ROLLBACK;

\echo '== for comparison: the weekly layout''s probe and today''s claim insert'
PREPARE weekly_probe(text) AS
  SELECT 1 FROM claims_weekly c WHERE c.tenant_id = 'pgbench' AND c.endpoint_id = 'pgbench' AND c.event_id = $1;
\o /dev/null
SELECT format('EXECUTE weekly_probe(%L)', 'warm-' || i) FROM generate_series(1, 7) i \gexec
\o
BEGIN;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) EXECUTE weekly_probe(:'old_key');
TABLE held;
ROLLBACK;
-- Since m20261207_000220 the claim's sealed body is a row of event_bodies.
PREPARE today_claim(text) AS
  WITH c AS (
    INSERT INTO inbox_claims (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at)
    VALUES ('pgbench', 'pgbench', $1, md5(random()::text), 'reminder.created', 'key', 'applied',
            (extract(epoch from now()) * 1000)::bigint)
    ON CONFLICT DO NOTHING RETURNING tenant_id, endpoint_id, event_id, received_at)
  INSERT INTO event_bodies (tenant_id, endpoint_id, event_id, received_at, filed_at, kek_version, body_ciphertext)
  SELECT tenant_id, endpoint_id, event_id, received_at, received_at, 1, decode(repeat('ab', 1057), 'hex') FROM c;
BEGIN;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) EXECUTE today_claim(md5(random()::text));
TABLE held;
ROLLBACK;

\echo '== relation locks a whole claim transaction holds at its commit (replay record, claim, reminder)'
\echo '-- generational (the claim as prepared above)'
BEGIN;
INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, expires_at, signed_at)
  SELECT 'pgbench', 'pgbench', md5(random()::text), 0, (extract(epoch from now()) * 1000)::bigint
  WHERE pg_advisory_xact_lock(hashtextextended('pgbench/pgbench/x', 0)) IS NOT NULL ON CONFLICT DO NOTHING;
EXECUTE claim(md5(random()::text), :g);
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
TABLE held;
ROLLBACK;
\echo '-- weekly'
BEGIN;
INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, expires_at, signed_at)
  SELECT 'pgbench', 'pgbench', md5(random()::text), 0, (extract(epoch from now()) * 1000)::bigint
  WHERE pg_advisory_xact_lock(hashtextextended('pgbench/pgbench/x', 0)) IS NOT NULL ON CONFLICT DO NOTHING;
INSERT INTO claims_weekly (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at,
                           body_ciphertext, kek_version)
  SELECT 'pgbench', 'pgbench', k, 'x', 'reminder.created', 'key', 'applied', (extract(epoch from now()) * 1000)::bigint,
         NULL, 1
  FROM md5(random()::text) k
  WHERE NOT EXISTS (SELECT 1 FROM claims_weekly c WHERE c.tenant_id = 'pgbench' AND c.endpoint_id = 'pgbench'
                    AND c.event_id = k)
  ON CONFLICT DO NOTHING;
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
TABLE held;
ROLLBACK;
\echo '-- today'
BEGIN;
INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, expires_at, signed_at)
  VALUES ('pgbench', 'pgbench', md5(random()::text), 0, (extract(epoch from now()) * 1000)::bigint) ON CONFLICT DO NOTHING;
EXECUTE today_claim(md5(random()::text));
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
TABLE held;
ROLLBACK;
