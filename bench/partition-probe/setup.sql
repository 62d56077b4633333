-- Beside a migrated Signet database: the claims as two partitioned
-- layouts, daily (30 days back, today, 3 ahead: 34 partitions) and weekly
-- (5 weeks back, this week, 1 ahead: 7), each day's or week's partition
-- with its own unique index on the claim key, and replay records by day.
-- The older days hold :rows claims each (no bodies), copied into the
-- unpartitioned inbox_claims too, so every layout starts with the same rows.
DROP TABLE IF EXISTS claims_daily, claims_weekly, replay_daily;
CREATE TABLE claims_daily (
  tenant_id text NOT NULL, endpoint_id text NOT NULL, event_id text NOT NULL, body_digest text NOT NULL,
  event_type text, key_id text NOT NULL, outcome text NOT NULL, received_at bigint NOT NULL,
  body_ciphertext bytea, kek_version int,
  PRIMARY KEY (tenant_id, endpoint_id, event_id, received_at)) PARTITION BY RANGE (received_at);
CREATE TABLE claims_weekly (LIKE claims_daily, PRIMARY KEY (tenant_id, endpoint_id, event_id, received_at))
  PARTITION BY RANGE (received_at);
CREATE TABLE replay_daily (
  tenant_id text NOT NULL, endpoint_id text NOT NULL, message_digest text NOT NULL, expires_at bigint NOT NULL,
  day int NOT NULL, PRIMARY KEY (tenant_id, endpoint_id, message_digest, day)) PARTITION BY RANGE (day);
DO $$
DECLARE today int := floor(extract(epoch from now()) / 86400); wk int := floor(extract(epoch from now()) / 604800); d int;
BEGIN
  FOR d IN today - 30 .. today + 3 LOOP
    EXECUTE format('CREATE TABLE claims_daily_%s PARTITION OF claims_daily FOR VALUES FROM (%s) TO (%s)',
                   d, d::bigint * 86400000, (d + 1)::bigint * 86400000);
    EXECUTE format('CREATE UNIQUE INDEX ON claims_daily_%s (tenant_id, endpoint_id, event_id)', d);
    EXECUTE format('CREATE TABLE replay_daily_%s PARTITION OF replay_daily FOR VALUES FROM (%s) TO (%s)', d, d, d + 1);
  END LOOP;
  FOR d IN wk - 5 .. wk + 1 LOOP
    EXECUTE format('CREATE TABLE claims_weekly_%s PARTITION OF claims_weekly FOR VALUES FROM (%s) TO (%s)',
                   d, d::bigint * 604800000, (d + 1)::bigint * 604800000);
    EXECUTE format('CREATE UNIQUE INDEX ON claims_weekly_%s (tenant_id, endpoint_id, event_id)', d);
  END LOOP;
END $$;
INSERT INTO claims_daily (tenant_id, endpoint_id, event_id, body_digest, key_id, outcome, received_at)
SELECT 'pgbench', 'pgbench', 'old-' || d || '-' || i, 'x', 'key', 'applied', d::bigint * 86400000 + i
FROM generate_series(floor(extract(epoch from now()) / 86400)::int - 30,
                     floor(extract(epoch from now()) / 86400)::int - 1) d,
     generate_series(1, :rows) i;
INSERT INTO claims_weekly SELECT * FROM claims_daily
  WHERE received_at >= (floor(extract(epoch from now()) / 604800) - 5)::bigint * 604800000;
INSERT INTO inbox_claims (tenant_id, endpoint_id, event_id, body_digest, key_id, outcome, received_at)
  SELECT tenant_id, endpoint_id, event_id, body_digest, key_id, outcome, received_at FROM claims_daily;
VACUUM ANALYZE claims_daily; VACUUM ANALYZE claims_weekly; VACUUM ANALYZE replay_daily; VACUUM ANALYZE inbox_claims;
