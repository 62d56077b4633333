#!/usr/bin/env bash
# The boundary race of generational claim keys (docs/scaling.md#design-generational-claim-keys),
# forced: claim A of a key lands in generation 1 and stays uncommitted for
# two seconds; claim B of the same key, half a second later, is in generation
# 2 and probes generation 1. Without the key's advisory lock B's snapshot
# misses A and both keys commit (2 rows: a second effect); with it B waits for
# A's commit and its statement then sees A's key (1 row).
#
#   bench/partition-probe/race.sh
set -euo pipefail
PG_ADMIN=${SIGNET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
db="signet_race_$$"
url="${PG_ADMIN%/*}/$db"
trap 'psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
psql -q "$url" <<'SQL'
CREATE TABLE claim_keys (tenant_id text, endpoint_id text, event_id text, generation int,
  PRIMARY KEY (tenant_id, endpoint_id, event_id, generation)) PARTITION BY RANGE (generation);
CREATE TABLE claim_keys_1 PARTITION OF claim_keys FOR VALUES FROM (1) TO (2);
CREATE TABLE claim_keys_2 PARTITION OF claim_keys FOR VALUES FROM (2) TO (3);
SQL

race() {
  local key=$1 lock=$2
  psql -qAt "$url" >/dev/null <<SQL &
BEGIN;
SELECT $lock IS NOT NULL;
INSERT INTO claim_keys VALUES ('t', 'e', '$key', 1) ON CONFLICT DO NOTHING;
SELECT pg_sleep(2);
COMMIT;
SQL
  sleep 0.5
  psql -qAt "$url" >/dev/null <<SQL
BEGIN;
SELECT $lock IS NOT NULL;
INSERT INTO claim_keys SELECT 't', 'e', '$key', 2
  WHERE NOT EXISTS (SELECT 1 FROM claim_keys WHERE tenant_id = 't' AND endpoint_id = 'e' AND event_id = '$key'
                    AND generation = 1)
  ON CONFLICT DO NOTHING;
COMMIT;
SQL
  wait
  echo "$key: $(psql -qAt "$url" -c "SELECT count(*) FROM claim_keys WHERE event_id = '$key'") key row(s)"
}
race without-lock true
race with-lock "pg_advisory_xact_lock(hashtextextended('t/e/with-lock', 0))"
