-- The receiver's claim transaction for a reminder.created event, as pgbench
-- runs it: the ceiling the real server is compared with.
\set n random(1, 2000000000)
BEGIN;
INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, expires_at)
  VALUES ('pgbench', 'pgbench', md5(:n::text || ':' || :client_id || random()::text), 0) ON CONFLICT DO NOTHING;
INSERT INTO inbox_claims (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at, body_ciphertext, kek_version)
  VALUES ('pgbench', 'pgbench', md5(:n::text || random()::text), md5(random()::text), 'reminder.created', 'key', 'applied', 0,
          decode(repeat('ab', 1057), 'hex'), 1) ON CONFLICT DO NOTHING;
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
COMMIT;
