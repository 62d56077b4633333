// Interoperability: webhooks signed by the providers' official libraries
// (standardwebhooks, stripe-node, @octokit/webhooks-methods) must verify
// exactly, over the exact bytes sent.
import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { signetBin } from '../global-setup';
import { serverState } from './helpers';

test.describe.configure({ mode: 'serial' });

const secrets: Record<string, string> = {};

function cli(dataDir: string, args: string[]): any {
  const out = execFileSync(signetBin, ['--json', ...args], { env: { ...process.env, SIGNET_DATA_DIR: dataDir } });
  return JSON.parse(out.toString());
}

test.beforeAll(async ({}, info) => {
  const { dataDir } = serverState(info);
  cli(dataDir, ['tenant', 'create', 'clinic-i']);
  for (const [slug, scheme] of [['sw', 'standard-webhooks'], ['st', 'stripe'], ['gh', 'github']]) {
    cli(dataDir, ['endpoint', 'create', 'clinic-i', slug, '--scheme', scheme]);
    secrets[slug] = cli(dataDir, ['key', 'provision', 'clinic-i', slug, '--approve-as', 'interop'])['secret'];
  }
});

function reminder(id: string, extra: Record<string, unknown> = {}) {
  // Unusual but valid JSON spacing and unicode: signatures cover raw bytes.
  return `{ "type":"reminder.created",  "data": {"reminder_id": "${id}", "send_at": "2027-01-05T09:00:00Z", "note": "caf\u00e9 ☕"}${Object.keys(extra).length ? ', ' + JSON.stringify(extra).slice(1, -1) : ''} }`;
}

test('Standard Webhooks: the official library signs, Signet verifies', async ({ request }) => {
  const wh = new Webhook(secrets.sw);
  const id = `msg_${randomUUID()}`;
  const payload = reminder(`sw-${id}`);
  const ts = new Date();
  const signature = wh.sign(id, ts, payload);
  const headers = { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(ts.getTime() / 1000)), 'webhook-signature': signature };
  const first = await request.post('/hooks/clinic-i/sw', { headers, data: payload });
  expect(first.status()).toBe(200);
  expect(await first.json()).toEqual({ status: 'applied', event_id: id });
  // The library's own retry: re-signed later with the same id.
  const later = new Date(ts.getTime() + 1000);
  const retry = await request.post('/hooks/clinic-i/sw', {
    headers: { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(later.getTime() / 1000)), 'webhook-signature': wh.sign(id, later, payload) },
    data: payload,
  });
  expect(await retry.json()).toMatchObject({ status: 'duplicate', original: 'applied' });
  // One byte changed: refused.
  const tampered = await request.post('/hooks/clinic-i/sw', { headers, data: payload.replace('☕', '☔') });
  expect(tampered.status()).toBe(401);
  expect(await tampered.json()).toEqual({ error: 'signature_mismatch' });
});

test('Stripe: stripe-node test headers (with a v0 entry) verify', async ({ request }) => {
  const stripe = new Stripe('sk_test_interop');
  const id = `evt_${randomUUID().replace(/-/g, '')}`;
  const payload = reminder(`st-${id}`, { id });
  const header = stripe.webhooks.generateTestHeaderString({ payload, secret: secrets.st });
  const withV0 = `${header},v0=${'0'.repeat(64)}`;
  const res = await request.post('/hooks/clinic-i/st', { headers: { 'Stripe-Signature': withV0 }, data: payload });
  expect(res.status()).toBe(200);
  expect(await res.json()).toEqual({ status: 'applied', event_id: id });
  const stale = stripe.webhooks.generateTestHeaderString({ payload, secret: secrets.st, timestamp: Math.floor(Date.now() / 1000) - 3600 });
  const old = await request.post('/hooks/clinic-i/st', { headers: { 'Stripe-Signature': stale }, data: payload });
  expect(old.status()).toBe(401);
  expect(await old.json()).toEqual({ error: 'timestamp_outside_window' });
});

test('GitHub: @octokit/webhooks-methods signatures verify', async ({ request }) => {
  const { sign } = await import('@octokit/webhooks-methods');
  const delivery = randomUUID();
  const payload = reminder(`gh-${delivery}`);
  const signature = await sign(secrets.gh, payload);
  const headers = { 'X-Hub-Signature-256': signature, 'X-GitHub-Delivery': delivery, 'X-GitHub-Event': 'reminder' };
  const res = await request.post('/hooks/clinic-i/gh', { headers, data: payload });
  expect(res.status()).toBe(200);
  expect(await res.json()).toEqual({ status: 'applied', event_id: delivery });
  // GitHub signs no timestamp: an identical redelivery is a duplicate.
  const again = await request.post('/hooks/clinic-i/gh', { headers, data: payload });
  expect(await again.json()).toMatchObject({ status: 'duplicate' });
});
