-- Weekly partitions: the same as daily.sql with 7 partitions to probe
-- instead of 34, and the replay records unpartitioned (their rows live
-- minutes), which the lock rides on.
\set n random(1, 2000000000)
BEGIN;
INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, expires_at, signed_at)
  SELECT 'pgbench', 'pgbench', md5(:n::text || ':' || :client_id || random()::text), 0, (extract(epoch from now()) * 1000)::bigint
  WHERE pg_advisory_xact_lock(hashtextextended('pgbench/pgbench/' || md5(:n::text || ':' || :client_id), 0)) IS NOT NULL
  ON CONFLICT DO NOTHING;
INSERT INTO claims_weekly (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at,
                          body_ciphertext, kek_version)
  SELECT 'pgbench', 'pgbench', md5(:n::text || ':' || :client_id), md5(random()::text), 'reminder.created', 'key',
         'applied', (extract(epoch from now()) * 1000)::bigint, decode(repeat('ab', 1057), 'hex'), 1
  WHERE NOT EXISTS (SELECT 1 FROM claims_weekly c WHERE c.tenant_id = 'pgbench' AND c.endpoint_id = 'pgbench'
                    AND c.event_id = md5(:n::text || ':' || :client_id))
  ON CONFLICT DO NOTHING;
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
COMMIT;
