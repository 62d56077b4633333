"""The SQLite purge's write volume: endpoint by endpoint (as
domain::retention::purge ran it before in_arrival_order) against in arrival
order across endpoints (docs/benchmarks.md#sqlites-purge-in-arrival-order).

    target/release/dashbench --database-url "sqlite://$PWD/p.db?mode=rwc" \
        --events 1000000 --sealed-body-days 7 --seed-only --master-key-file key
    python3 bench/purge-order.py p.db prepare   # bodies re-filed in arrival order
    cp p.db a.db; python3 bench/purge-order.py a.db per-endpoint
    cp p.db b.db; python3 bench/purge-order.py b.db time-order

The seeding files the bodies endpoint by endpoint; `prepare` re-inserts them
in arrival order, as the receiver files them (and VACUUMs). Each run deletes
what a purge one day later deletes: a day of bodies past 7 days and a day of
claims past 30, 500 rows per transaction, WAL with synchronous=FULL (the
server's settings), and prints the bytes this process wrote
(/proc/self/io write_bytes: WAL and checkpoints) and the time."""
import sqlite3, sys, time

DAY = 86_400_000

def io_written():
    for line in open('/proc/self/io'):
        if line.startswith('write_bytes:'):
            return int(line.split()[1])

def connect(path):
    c = sqlite3.connect(path, isolation_level=None)
    c.execute('PRAGMA journal_mode=WAL')
    c.execute('PRAGMA synchronous=FULL')
    return c

def cutoffs(c):
    newest = c.execute('SELECT MAX(received_at) FROM inbox_claims').fetchone()[0]
    now = newest + DAY  # as if a day had passed since the seeding
    return now - 30 * DAY, now - 7 * DAY

def delete_bodies(c, endpoint, rows):
    """rows: (received_at, event_id) of one endpoint; by the key's span."""
    ats = [r[0] for r in rows]
    q = ','.join('?' * len(rows))
    return c.execute(
        f'DELETE FROM event_bodies WHERE endpoint_id = ? AND received_at BETWEEN ? AND ? AND event_id IN ({q})',
        [endpoint, min(ats), max(ats)] + [r[1] for r in rows]).rowcount

def per_endpoint(c, claim_cut, body_cut):
    endpoints = [r for r in c.execute('SELECT id, tenant_id FROM endpoints ORDER BY id')]
    claims = bodies = txns = 0
    for e, t in endpoints:
        while True:
            c.execute('BEGIN IMMEDIATE')
            rows = c.execute('SELECT received_at, event_id FROM event_bodies WHERE endpoint_id = ? AND received_at < ? LIMIT 500',
                             (e, body_cut)).fetchall()
            if rows:
                bodies += delete_bodies(c, e, rows)
            c.execute('COMMIT'); txns += 1
            if len(rows) < 500:
                break
        while True:
            c.execute('BEGIN IMMEDIATE')
            rows = c.execute('SELECT received_at, event_id FROM inbox_claims WHERE endpoint_id = ? AND received_at < ? LIMIT 500',
                             (e, claim_cut)).fetchall()
            if rows:
                q = ','.join('?' * len(rows))
                claims += c.execute(f'DELETE FROM inbox_claims WHERE tenant_id = ? AND endpoint_id = ? AND event_id IN ({q})',
                                    [t, e] + [r[1] for r in rows]).rowcount
                delete_bodies(c, e, rows)
            c.execute('COMMIT'); txns += 1
            if len(rows) < 500:
                break
    return claims, bodies, txns

def in_time_order(c, claim_cut, body_cut):
    claims = bodies = txns = 0
    # Bodies: the claims' age index gives the order; a batch's bodies go by
    # their key, endpoint by endpoint within the batch.
    start = min(r[0] for r in c.execute(
        'SELECT (SELECT MIN(received_at) FROM event_bodies b WHERE b.endpoint_id = e.id) FROM endpoints e') if r[0] is not None)
    for what, cut in (('bodies', body_cut), ('claims', claim_cut)):
        at = start if what == 'bodies' else 0
        while True:
            c.execute('BEGIN IMMEDIATE')
            rows = c.execute('SELECT rowid, tenant_id, endpoint_id, event_id, received_at FROM inbox_claims '
                             'WHERE received_at >= ? AND received_at < ? ORDER BY received_at LIMIT 500', (at, cut)).fetchall()
            by_endpoint = {}
            for r in rows:
                by_endpoint.setdefault(r[2], []).append((r[4], r[3]))
            if what == 'claims' and rows:
                q = ','.join('?' * len(rows))
                claims += c.execute(f'DELETE FROM inbox_claims WHERE rowid IN ({q})', [r[0] for r in rows]).rowcount
            for e, rs in by_endpoint.items():
                n = delete_bodies(c, e, rs)
                if what == 'bodies':
                    bodies += n
            c.execute('COMMIT'); txns += 1
            if len(rows) < 500:
                break
            at = rows[-1][4]
    return claims, bodies, txns

def prepare(c):
    c.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    c.execute('BEGIN')
    c.execute('CREATE TEMP TABLE b AS SELECT * FROM event_bodies')
    c.execute('DELETE FROM event_bodies')
    c.execute('INSERT INTO event_bodies SELECT * FROM b ORDER BY received_at')
    c.execute('COMMIT')
    c.execute('VACUUM')

def main(path, how):
    c = connect(path)
    if how == 'prepare':
        return prepare(c)
    claim_cut, body_cut = cutoffs(c)
    c.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    w0, t0 = io_written(), time.time()
    claims, bodies, txns = (per_endpoint if how == 'per-endpoint' else in_time_order)(c, claim_cut, body_cut)
    c.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    w1, t1 = io_written(), time.time()
    print(f'| {how} | {claims} | {bodies} | {txns} | {t1 - t0:.1f} | {(w1 - w0) / 1e9:.2f} GB |')

if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
