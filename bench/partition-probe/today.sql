-- Today's claim transaction (bench/claim.sql, received now): the baseline.
\set n random(1, 2000000000)
BEGIN;
INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, expires_at, signed_at)
  VALUES ('pgbench', 'pgbench', md5(:n::text || ':' || :client_id || random()::text), 0, (extract(epoch from now()) * 1000)::bigint) ON CONFLICT DO NOTHING;
INSERT INTO inbox_claims (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at)
  VALUES ('pgbench', 'pgbench', md5(:n::text || ':' || :client_id), md5(random()::text), 'reminder.created', 'key',
          'applied', (extract(epoch from now()) * 1000)::bigint)
  ON CONFLICT DO NOTHING;
-- Since m20261207_000220 the sealed body is its own row, beside the claim.
INSERT INTO event_bodies (tenant_id, endpoint_id, event_id, received_at, filed_at, kek_version, body_ciphertext)
  VALUES ('pgbench', 'pgbench', md5(:n::text || ':' || :client_id), (extract(epoch from now()) * 1000)::bigint,
          (extract(epoch from now()) * 1000)::bigint, 1, decode(repeat('ab', 1057), 'hex'));
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
COMMIT;
