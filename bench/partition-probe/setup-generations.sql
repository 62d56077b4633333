-- After setup.sql: the generational layout (generations.sql) for each
-- generation length G in :'gens' (e.g. '8,32'), docs/scaling.md#design-generational-claim-keys.
--   gen<G>.claim_keys  the narrow key rows, partitioned by generation (floor(day / G)): the
--                      previous, the current and the next generation, each with its own primary key
--                      (tenant_id, endpoint_id, event_id, generation);
--   claims_by_day      the claims themselves, by day of received_at, with no unique index across
--                      days (their uniqueness comes from the keys), shared by every G.
-- The rows are a year of traffic in its steady state. The last 30 days hold the :rows claims a
-- day of setup.sql ('old-<day>-<i>'): one in ten kept 10 years, the others the default 30 days.
-- The 335 days before hold only their 10-year claims (the others are past their retention): a
-- tenth of :rows a day. Each key sits in the generations the upkeep leaves it in: its own, and
-- every later one that began before it expires minus one generation (the copy-forward), of which
-- only the previous and current generations still exist (older ones were dropped whole). The
-- 10-year claims of the older days are added to today's inbox_claims too, so every layout holds
-- the same live keys.
DROP SCHEMA IF EXISTS gen8 CASCADE;
DROP SCHEMA IF EXISTS gen32 CASCADE;
DROP TABLE IF EXISTS claims_by_day;
\set ON_ERROR_STOP 1
SELECT set_config('probe.gens', :'gens', false), set_config('probe.rows', :'rows', false) \g /dev/null
CREATE TABLE claims_by_day (
  tenant_id text NOT NULL, endpoint_id text NOT NULL, event_id text NOT NULL, body_digest text NOT NULL,
  event_type text, key_id text NOT NULL, outcome text NOT NULL, received_at bigint NOT NULL,
  body_ciphertext bytea, kek_version int,
  PRIMARY KEY (tenant_id, endpoint_id, event_id, received_at)) PARTITION BY RANGE (received_at);
CREATE TEMP TABLE probe_keys (event_id text NOT NULL, day int NOT NULL, received_at bigint NOT NULL,
                              keep_until bigint NOT NULL);
DO $$
DECLARE today int := floor(extract(epoch from now()) / 86400); rows int := current_setting('probe.rows')::int;
        x int; g int; cur int; gens int[] := string_to_array(current_setting('probe.gens'), ',')::int[];
BEGIN
  FOR x IN today - 365 .. today + 3 LOOP
    EXECUTE format('CREATE TABLE claims_by_day_%s PARTITION OF claims_by_day FOR VALUES FROM (%s) TO (%s)',
                   x, x::bigint * 86400000, (x + 1)::bigint * 86400000);
  END LOOP;
  INSERT INTO probe_keys
    SELECT 'old-' || d || '-' || i, d, d::bigint * 86400000 + i,
           d::bigint * 86400000 + i + CASE WHEN i % 10 = 0 THEN 3650 ELSE 30 END * 86400000::bigint
    FROM generate_series(today - 30, today - 1) d, generate_series(1, rows) i;
  INSERT INTO probe_keys
    SELECT 'old-' || d || '-' || i, d, d::bigint * 86400000 + i, d::bigint * 86400000 + i + 3650 * 86400000::bigint
    FROM generate_series(today - 365, today - 31) d, generate_series(10, rows, 10) i;
  FOREACH g IN ARRAY gens LOOP
    cur := floor(today::numeric / g);
    EXECUTE format('CREATE SCHEMA gen%s', g);
    EXECUTE format('CREATE TABLE gen%s.claim_keys (tenant_id text NOT NULL, endpoint_id text NOT NULL, '
                   'event_id text NOT NULL, generation int NOT NULL, claim_day int NOT NULL, '
                   'keep_until bigint NOT NULL, PRIMARY KEY (tenant_id, endpoint_id, event_id, generation)) '
                   'PARTITION BY RANGE (generation)', g);
    FOR x IN cur - 1 .. cur + 1 LOOP
      EXECUTE format('CREATE TABLE gen%s.claim_keys_%s PARTITION OF gen%s.claim_keys FOR VALUES FROM (%s) TO (%s)',
                     g, x, g, x, x + 1);
    END LOOP;
    -- A key is in generation p if it was claimed there, or claimed earlier and still kept after
    -- p + 1 begins (each generation's upkeep copied it forward from the one before).
    FOR x IN cur - 1 .. cur LOOP
      EXECUTE format('INSERT INTO gen%s.claim_keys SELECT ''pgbench'', ''pgbench'', event_id, %s, day, keep_until '
                     'FROM probe_keys WHERE day / %s = %s OR (day / %s < %s AND keep_until > %s)',
                     g, x, g, x, g, x, (x + 1)::bigint * g * 86400000);
    END LOOP;
  END LOOP;
END $$;
INSERT INTO claims_by_day (tenant_id, endpoint_id, event_id, body_digest, key_id, outcome, received_at)
  SELECT 'pgbench', 'pgbench', event_id, 'x', 'key', 'applied', received_at FROM probe_keys;
INSERT INTO inbox_claims (tenant_id, endpoint_id, event_id, body_digest, key_id, outcome, received_at)
  SELECT 'pgbench', 'pgbench', event_id, 'x', 'key', 'applied', received_at
  FROM probe_keys WHERE day < floor(extract(epoch from now()) / 86400)::int - 30;
VACUUM ANALYZE claims_by_day; VACUUM ANALYZE inbox_claims;
SELECT format('VACUUM ANALYZE gen%s.claim_keys', g) FROM unnest(string_to_array(:'gens', ',')) g \gexec
SELECT format('SELECT %L AS layout, generation, count(*) AS keys FROM gen%s.claim_keys GROUP BY 2 ORDER BY 2',
              'gen' || g, g) FROM unnest(string_to_array(:'gens', ',')) g \gexec
