-- The receiver's shared claim transaction (domain::receiver::batch) for four
-- reminder.created events, as pgbench runs it: replay records and claims as
-- multi-row inserts, the claims' bodies as a third, then each event's effect. For reference only (events/s
-- = 4 × tx/s); the ceiling of record is bench/claim.sql, one event per
-- transaction.
\set n random(1, 2000000000)
BEGIN;
INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, expires_at, signed_at) VALUES
  ('pgbench', 'pgbench', md5(:n::text || ':0:' || :client_id || random()::text), 0, (extract(epoch from now()) * 1000)::bigint),
  ('pgbench', 'pgbench', md5(:n::text || ':1:' || :client_id || random()::text), 0, (extract(epoch from now()) * 1000)::bigint),
  ('pgbench', 'pgbench', md5(:n::text || ':2:' || :client_id || random()::text), 0, (extract(epoch from now()) * 1000)::bigint),
  ('pgbench', 'pgbench', md5(:n::text || ':3:' || :client_id || random()::text), 0, (extract(epoch from now()) * 1000)::bigint)
  ON CONFLICT DO NOTHING RETURNING endpoint_id, message_digest;
INSERT INTO inbox_claims (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at) VALUES
  ('pgbench', 'pgbench', md5(:n::text || ':0:' || :client_id), md5(random()::text), 'reminder.created', 'key', 'applied', 0),
  ('pgbench', 'pgbench', md5(:n::text || ':1:' || :client_id), md5(random()::text), 'reminder.created', 'key', 'applied', 0),
  ('pgbench', 'pgbench', md5(:n::text || ':2:' || :client_id), md5(random()::text), 'reminder.created', 'key', 'applied', 0),
  ('pgbench', 'pgbench', md5(:n::text || ':3:' || :client_id), md5(random()::text), 'reminder.created', 'key', 'applied', 0)
  ON CONFLICT DO NOTHING RETURNING tenant_id, endpoint_id, event_id;
-- The new claims' sealed bodies, their own rows since m20261207_000220.
INSERT INTO event_bodies (tenant_id, endpoint_id, event_id, received_at, filed_at, kek_version, body_ciphertext) VALUES
  ('pgbench', 'pgbench', md5(:n::text || ':0:' || :client_id), 0, (extract(epoch from now()) * 1000)::bigint, 1, decode(repeat('ab', 1057), 'hex')),
  ('pgbench', 'pgbench', md5(:n::text || ':1:' || :client_id), 0, (extract(epoch from now()) * 1000)::bigint, 1, decode(repeat('ab', 1057), 'hex')),
  ('pgbench', 'pgbench', md5(:n::text || ':2:' || :client_id), 0, (extract(epoch from now()) * 1000)::bigint, 1, decode(repeat('ab', 1057), 'hex')),
  ('pgbench', 'pgbench', md5(:n::text || ':3:' || :client_id), 0, (extract(epoch from now()) * 1000)::bigint, 1, decode(repeat('ab', 1057), 'hex'));
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
INSERT INTO reminders (tenant_id, reminder_id, status, send_at, created_at, updated_at)
  VALUES ('pgbench', md5(random()::text), 'scheduled', 0, 0, 0) ON CONFLICT DO NOTHING;
COMMIT;
