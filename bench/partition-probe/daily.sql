-- Daily partitions. The claim key's advisory lock rides on the replay
-- record's insert (no extra statement), so the claim statement's snapshot,
-- taken after it, sees every committed claim of the key; the claim is
-- inserted only if no day's partition holds the key (a probe of all 34).
\set n random(1, 2000000000)
BEGIN;
INSERT INTO replay_daily (tenant_id, endpoint_id, message_digest, expires_at, day)
  SELECT 'pgbench', 'pgbench', md5(:n::text || ':' || :client_id || random()::text), 0,
         floor(extract(epoch from now()) / 86400)::int
  WHERE pg_advisory_xact_lock(hashtextextended('pgbench/pgbench/' || md5(:n::text || ':' || :client_id), 0)) IS NOT NULL
  ON CONFLICT DO NOTHING;
INSERT INTO claims_daily (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at,
                          body_ciphertext, kek_version)
  SELECT 'pgbench', 'pgbench', md5(:n::text || ':' || :client_id), md5(random()::text), 'reminder.created', 'key',
         'applied', (extract(epoch from now()) * 1000)::bigint, decode(repeat('ab', 1057), 'hex'), 1
  WHERE NOT EXISTS (SELECT 1 FROM claims_daily c WHERE c.tenant_id = 'pgbench' AND c.endpoint_id = 'pgbench'
                    AND c.event_id = md5(:n::text || ':' || :client_id))
  ON CONFLICT DO NOTHING;
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
COMMIT;
