// The console's core journeys, run once with JavaScript off (plain SSR form
// posts) and once hydrated. Each project has its own fresh server.
import { APIRequestContext, expect } from '@playwright/test';
import { chmodSync } from 'node:fs';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { PASSWORD, serverState, shot, signIn, test } from './helpers';

test.describe.configure({ mode: 'serial' });

let secret = '';
let keyId = '';

test('the administrator bootstraps from the one-time setup link', async ({ page }, info) => {
  const { setupUrl } = serverState(info);
  await page.goto(setupUrl);
  await page.getByLabel('Username').fill('root');
  await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await page.getByLabel('Confirm password').fill(PASSWORD);
  await shot(page, info, '01-setup');
  await page.getByRole('button', { name: 'Create administrator' }).click();
  await expect(page).toHaveURL(/\/login\?setup=done/);
  await expect(page.getByText('Administrator created')).toBeVisible();
  // The link is single-use.
  await page.goto(setupUrl);
  await expect(page.getByText(/setup is finished|already/i)).toBeVisible();
  await signIn(page, 'root');
  await shot(page, info, '02-empty-tenants');
});

test('the administrator creates clinics, endpoints and users', async ({ page }, info) => {
  await signIn(page, 'root');
  for (const [slug, name] of [['clinic-a', 'Clinic A'], ['clinic-b', 'Clinic B']]) {
    await page.goto('/tenants');
    await page.getByLabel('Slug').fill(slug);
    await page.getByLabel('Display name').fill(name);
    await page.getByRole('button', { name: 'Create tenant' }).click();
    await expect(page).toHaveURL(new RegExp(`/tenants/${slug}$`));
    await page.getByLabel('Endpoint slug').fill('reminders');
    await page.getByLabel('Scheme').selectOption('standard-webhooks');
    await page.getByLabel('Event types').fill('reminder.created, reminder.scheduled, otp.requested');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await expect(page.getByText(`/hooks/${slug}/reminders`)).toBeVisible();
  }
  await shot(page, info, '03-tenant-with-endpoint');
  for (const [username, role, tenant] of [
    ['alice', 'clinic-admin', 'clinic-a'],
    ['bob', 'clinic-admin', 'clinic-b'],
    ['rita', 'reviewer', ''],
    ['otto', 'oncall', ''],
  ]) {
    await page.goto('/users');
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Role').first().selectOption(role);
    if (tenant) await page.getByLabel('Tenant').first().fill(tenant);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create user' }).click();
    await expect(page.getByRole('cell', { name: username, exact: true })).toBeVisible();
  }
  await shot(page, info, '04-users');
  await page.goto('/tenants');
  await shot(page, info, '05-tenants');
});

test('a clinic admin provisions a key and sees the secret exactly once', async ({ page }, info) => {
  await signIn(page, 'alice');
  await expect(page).toHaveURL(/\/tenants\/clinic-a$/);
  await page.getByLabel('Owner').first().fill('reminders-team');
  await page.getByRole('button', { name: 'Provision key' }).first().click();
  await expect(page).toHaveURL(/\/keys\/key_[0-9a-f]+\/secret\?reveal=/);
  keyId = page.url().match(/keys\/(key_[0-9a-f]+)/)![1];
  const box = page.getByTestId('secret');
  await expect(box).toContainText('whsec_');
  secret = (await box.textContent())!.trim();
  expect(secret).toMatch(/^whsec_[A-Za-z0-9+/=]{44}$/);
  await expect(page.getByText(/will not see this secret again/i)).toBeVisible();
  await shot(page, info, '06-secret-once');
  await page.reload();
  await expect(page.getByTestId('secret')).toHaveCount(0);
  await expect(page.getByText(/already been shown/i)).toBeVisible();
  await shot(page, info, '07-secret-gone');
  await page.goto('/tenants/clinic-a');
  await expect(page.getByText(keyId)).toBeVisible();
  await expect(page.getByText('pending approval').first()).toBeVisible();
  expect(await page.content()).not.toContain(secret);
  await shot(page, info, '08-tenant-pending-key');
});

test('a clinic admin cannot see another clinic', async ({ page }, info) => {
  await signIn(page, 'alice');
  await page.goto('/tenants/clinic-b');
  await expect(page.getByText(/not found/i).first()).toBeVisible();
  await expect(page.getByText('/hooks/clinic-b/reminders')).toHaveCount(0);
  await shot(page, info, '09-other-clinic');
  await page.goto('/tenants');
  await expect(page.getByRole('link', { name: 'clinic-a' })).toBeVisible();
  await expect(page.getByRole('link', { name: 'clinic-b' })).toHaveCount(0);
  await page.goto(`/audit`);
  await expect(page.getByText('clinic-b')).toHaveCount(0);
});

test('the reviewer approves the key scope', async ({ page }, info) => {
  await signIn(page, 'rita');
  await expect(page).toHaveURL(/\/approvals/);
  const item = page.locator('article', { hasText: keyId });
  await expect(item).toContainText('reminder.created');
  await expect(item).toContainText('otp.requested');
  await shot(page, info, '10-approval-queue');
  await item.getByLabel(/Comment/).first().fill('Scope matches the reminder integration');
  await item.getByRole('button', { name: 'Approve' }).click();
  await expect(page.getByText(/approved/i).first()).toBeVisible();
  await expect(page.locator('article', { hasText: keyId })).toHaveCount(0);
  await expect(page.getByRole('cell', { name: 'Scope matches the reminder integration' })).toBeVisible();
  await shot(page, info, '11-approval-history');
  await page.goto('/tenants/clinic-a');
  await expect(page.locator('tr', { hasText: keyId })).toContainText('active');
});

test('the clinic admin rotates and then revokes', async ({ page, browser }, info) => {
  await signIn(page, 'alice');
  await page.goto(`/keys/${keyId}/rotate`);
  await page.getByLabel(/Overlap/).fill('2');
  await shot(page, info, '12-rotate');
  await page.getByRole('button', { name: 'Rotate key' }).click();
  await expect(page.getByTestId('secret')).toContainText('whsec_');
  const newSecret = (await page.getByTestId('secret').textContent())!.trim();
  expect(newSecret).not.toEqual(secret);
  const newKey = page.url().match(/keys\/(key_[0-9a-f]+)/)![1];
  await page.goto('/tenants/clinic-a');
  // Until the replacement is approved the old key stays active.
  await expect(page.locator('tr', { hasText: keyId })).toContainText('active');
  await expect(page.locator('tr', { hasText: newKey })).toContainText('pending approval');

  const reviewer = await browser.newPage();
  await signIn(reviewer, 'rita');
  const item = reviewer.locator('article', { hasText: newKey });
  await item.getByRole('button', { name: 'Approve' }).click();
  await expect(reviewer.locator('article', { hasText: newKey })).toHaveCount(0);
  await reviewer.close();

  await page.goto('/tenants/clinic-a');
  await expect(page.locator('tr', { hasText: keyId })).toContainText('retiring');
  await expect(page.locator('tr', { hasText: keyId })).toContainText(/expires in/i);
  await shot(page, info, '13-overlap');

  await page.goto(`/keys/${newKey}/revoke`);
  // The key's own verification log: nothing has failed under it.
  await expect(page.getByTestId('key-failures')).toHaveText('none');
  await page.getByLabel(/Reason/).fill('rotation test complete');
  await shot(page, info, '14-revoke-confirm');
  await page.getByRole('button', { name: 'Revoke key' }).click();
  await expect(page).toHaveURL(/\/tenants\/clinic-a/);
  await expect(page.locator('tr', { hasText: newKey })).toContainText('revoked');
  // Events without an id: quarantined until the endpoint opts in to a key.
  await expect(page.getByTestId('event-key')).toContainText('missing_event_id');
  await shot(page, info, '15-revoked');
  await page.goto('/audit');
  await expect(page.getByText('key.revoke').first()).toBeVisible();
  await expect(page.getByText('Hash chain verified')).toHaveCount(0); // clinic admins do not see the global chain status
  expect(await page.content()).not.toContain(newSecret);
  await shot(page, info, '16-audit');
});

/** A provider delivery to clinic-a/reminders, signed by the official Standard Webhooks library. */
async function deliver(request: APIRequestContext, id: string, payload: string) {
  const ts = new Date();
  const headers = {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(ts.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, ts, payload),
  };
  const res = await request.post('/hooks/clinic-a/reminders', { headers, data: payload });
  return { status: res.status(), body: await res.json() };
}

test('on-call triages a quarantined event and releases it once the cause is fixed', async ({ page, request }, info) => {
  // A reschedule arrives before the reminder it refers to.
  const early = await deliver(request, 'msg_early', JSON.stringify({ type: 'reminder.scheduled', data: { reminder_id: 'r-late', phone: '+41 79 555 01 23' } }));
  expect(early).toEqual({ status: 202, body: { status: 'quarantined', reason: 'reminder_not_found' } });

  // On-call starts on the dashboard: the spike is there (rollups flush every 5 s).
  await signIn(page, 'otto');
  await expect(page).toHaveURL(/\/dashboard/);
  await page.goto('/dashboard?tenant=clinic-a&window=1h');
  const spike = page.locator('#quarantines').getByRole('link', { name: 'reminder not found' });
  await expect(async () => {
    await page.reload();
    await expect(spike).toBeVisible({ timeout: 1000 });
  }).toPass({ timeout: 20_000 });
  const awaiting = page.locator('.stats.tiles > div', { hasText: 'Awaiting triage' }).locator('dd');
  await expect(awaiting).toHaveText('1');
  await shot(page, info, '17-dashboard-spike');
  await spike.click();
  await expect(page).toHaveURL(/\/quarantine\?.*reason=reminder_not_found/);
  await expect(page.getByRole('link', { name: /reminder not found 1/ })).toBeVisible();
  const row = page.locator('tr', { hasText: 'msg_early' });
  await expect(row).toContainText('open');
  await shot(page, info, '17-quarantine-list');

  await row.getByRole('link').first().click();
  await expect(page.getByRole('heading', { name: /Quarantined event/ })).toBeVisible();
  await expect(page.getByText('The body may contain patient data')).toBeVisible();
  // A form post (Origin-checked, audited); the page it returns to shows the body once.
  await page.getByRole('button', { name: 'Show body' }).click();
  const body = page.getByTestId('event-body');
  await expect(body).toContainText('r-late');
  await expect(body).toContainText('[redacted]');
  await expect(body).not.toContainText('555');
  await shot(page, info, '18-quarantine-body');

  // Releasing now fails and says why; the event stays open.
  await page.getByLabel('Reason').first().fill('first try');
  await page.getByRole('button', { name: 'Release event' }).click();
  await expect(page.getByText(/still cannot apply \(reminder_not_found\)/).first()).toBeVisible();

  // The clinic's system sends the missing reminder; then the release applies.
  const created = await deliver(request, 'msg_created', JSON.stringify({ type: 'reminder.created', data: { reminder_id: 'r-late', send_at: '2027-01-05T09:00:00Z' } }));
  expect(created.body.status).toBe('applied');
  await page.goto(page.url().split('?')[0]);
  await expect(page.getByText(/last release attempt failed/i)).toBeVisible();
  await page.getByLabel('Reason').first().fill('reminder now exists');
  await page.getByRole('button', { name: 'Release event' }).click();
  await expect(page.getByText(/Released: the event applied/)).toBeVisible();
  await expect(page.getByRole('heading', { name: /Quarantined event/ })).toContainText('released');
  await expect(page.getByText('reminder now exists')).toBeVisible();
  await shot(page, info, '19-quarantine-released');

  // A provider retry of the released event is a duplicate of an applied one.
  const retry = await deliver(request, 'msg_early', JSON.stringify({ type: 'reminder.scheduled', data: { reminder_id: 'r-late', phone: '+41 79 555 01 23' } }));
  expect(retry.body).toMatchObject({ status: 'duplicate', original: 'applied' });

  await page.goto('/quarantine');
  await expect(page.getByText('Quarantine is empty')).toBeVisible();
  // The released reschedule asked for a reminder notice; the worker delivers it (file sink here).
  await page.getByRole('link', { name: 'Outbox' }).click();
  const notice = page.locator('tr', { hasText: 'reminder_notice' });
  await expect(async () => {
    await page.reload();
    await expect(notice).toContainText('sent', { timeout: 1000 });
  }).toPass({ timeout: 20_000 });
  await shot(page, info, '20-outbox');
  // The dashboard reflects it: nothing awaits triage, the release applied.
  await page.goto('/dashboard?tenant=clinic-a&window=1h');
  await expect(page.locator('.stats.tiles > div', { hasText: 'Awaiting triage' }).locator('dd')).toHaveText('0');
  await shot(page, info, '20-dashboard-after');
  await page.goto('/audit?action=quarantine.');
  await expect(page.getByText('quarantine.release', { exact: true })).toBeVisible();
  await expect(page.getByText('quarantine.release_failed').first()).toBeVisible();
  await expect(page.getByText('quarantine.reveal_body').first()).toBeVisible();
  expect(await page.content()).not.toContain('555 01 23');
  await shot(page, info, '20-quarantine-audit-log');
});

test('on-call finds an event by id from the dashboard and reads its whole story', async ({ page }, info) => {
  await signIn(page, 'otto');
  await page.goto('/dashboard?tenant=clinic-a&window=1h');
  const search = page.getByRole('search', { name: 'Find an event' });
  await search.getByLabel('Tenant').fill('clinic-a');
  await search.getByLabel('Endpoint').fill('reminders');
  await search.getByLabel('Event id').fill('msg_early');
  await search.getByRole('button', { name: 'Show its story' }).click();
  await expect(page).toHaveURL(/\/events\/clinic-a\/reminders\/msg_early$/);
  await expect(page.getByRole('heading', { name: 'Event msg_early' })).toBeVisible();
  // Every answer Signet gave: quarantined first, then the provider's retry as a duplicate.
  const deliveries = page.getByTestId('event-deliveries');
  await expect(deliveries.locator('tbody tr')).toHaveCount(2);
  await expect(deliveries).toContainText('202');
  await expect(deliveries).toContainText('duplicate');
  await expect(deliveries).toContainText('standard-webhooks');
  await expect(page.getByTestId('event-claim')).toContainText('reminder.scheduled');
  // The quarantine entry with its triage, the transition, the notice, the audit trail.
  const quarantine = page.locator('section.card', { has: page.getByRole('heading', { name: 'Quarantine' }) });
  await expect(quarantine).toContainText('released');
  await expect(quarantine).toContainText('quarantine.release_failed');
  await expect(page.locator('section.card', { has: page.getByRole('heading', { name: 'Reminder' }) })).toContainText('r-late');
  await expect(page.locator('section.card', { has: page.getByRole('heading', { name: 'Outbox' }) })).toContainText('reminder_notice');
  await expect(page.locator('section.card', { has: page.getByRole('heading', { name: 'Audit' }) })).toContainText('quarantine.release');
  // Never the body (health data): only a link to the audited reveal.
  expect(await page.content()).not.toContain('555 01 23');
  await shot(page, info, '20a-event-story');
  // An event that does not exist reads as not found, whatever the tenant.
  await page.goto('/events/clinic-a/reminders/msg_never_sent');
  await expect(page.getByText(/not found/i).first()).toBeVisible();
});

test('on-call bulk-releases a backlog and watches it finish', async ({ page, request }, info) => {
  // Four reschedules arrive before their reminders; then three reminders arrive.
  for (const n of [1, 2, 3, 4]) {
    const early = await deliver(request, `msg_bulk_${n}`, JSON.stringify({ type: 'reminder.scheduled', data: { reminder_id: `r-bulk-${n}` } }));
    expect(early.body.reason).toBe('reminder_not_found');
  }
  for (const n of [1, 2, 3]) {
    const created = await deliver(request, `msg_bulk_new_${n}`, JSON.stringify({ type: 'reminder.created', data: { reminder_id: `r-bulk-${n}`, send_at: '2027-01-05T09:00:00Z' } }));
    expect(created.body.status).toBe('applied');
  }
  await signIn(page, 'otto');
  await page.goto('/quarantine?tenant=clinic-a&reason=reminder_not_found');
  const form = page.locator('section', { hasText: 'Release everything matching' });
  await expect(form).toContainText('4 open event(s) match these filters');
  await form.getByLabel('Reason').fill('reminders backfilled by the clinic');
  await form.getByRole('button', { name: 'Release matching events' }).click();

  // The progress page moves on its own (polling once hydrated, a meta refresh without JavaScript).
  await expect(page).toHaveURL(/\/quarantine\/bulk\//);
  const jobUrl = page.url();
  await expect(page.getByText(/Releasing \d of 4 events/)).toBeVisible();
  await expect(page.getByRole('progressbar')).toBeVisible();
  await shot(page, info, '21-bulk-release-running');
  await expect(page.getByText('Done: 3 of 4 released.')).toBeVisible({ timeout: 20_000 });
  // The same page (its meta refresh marks itself `?auto=1`: not activity).
  expect(page.url().split('?')[0]).toBe(jobUrl);
  await expect(page.getByRole('heading', { name: /Bulk release/ })).toContainText('finished');
  await expect(page.locator('[data-count="released"]')).toHaveText('3');
  await expect(page.locator('[data-count="still-failing"]')).toHaveText('1');
  await expect(page.locator('[data-count="remaining"]')).toHaveText('0');
  const failing = page.locator('section', { hasText: 'Still cannot apply' }).locator('tbody tr');
  await expect(failing).toHaveCount(1);
  await expect(failing).toContainText('msg_bulk_4');
  await expect(failing).toContainText('reminder_not_found');
  await shot(page, info, '21-bulk-release-finished');

  // The one that still fails is open, and the job is listed on the quarantine page.
  await failing.getByRole('link').click();
  await expect(page.getByRole('heading', { name: /Quarantined event/ })).toContainText('open');
  await expect(page.getByText('msg_bulk_4').first()).toBeVisible();
  await page.goto('/quarantine');
  const recent = page.locator('section', { hasText: 'Recent bulk releases' });
  await expect(recent).toContainText('clinic-a, reason reminder not found');
  await expect(recent).toContainText('3 of 4 released');
  await shot(page, info, '21-quarantine-recent-bulk');
  await page.goto('/audit?action=quarantine.bulk_release');
  await expect(page.getByText('quarantine.bulk_release.start', { exact: true })).toBeVisible();
  await expect(page.getByText('quarantine.bulk_release.finish', { exact: true })).toBeVisible();
});

test('the administrator cannot enable retries before the drills and a review', async ({ page }, info) => {
  await signIn(page, 'root');
  // New tenants start with retries off (seed 000's rollout order); the
  // cohort form shows the latest drill run beside the tenants it moves,
  // and enabling is refused until drills passed and a bundle was approved.
  await page.goto('/tenants');
  const cohort = page.locator('#cohort');
  await expect(cohort.getByTestId('cohort-drills')).toContainText('No drill run yet');
  await expect(cohort.locator('label', { hasText: 'clinic-a' })).toContainText('retries disabled');
  await cohort.locator('label', { hasText: 'clinic-a' }).getByRole('checkbox').check();
  await cohort.getByLabel('Policy').selectOption('enabled');
  await cohort.getByLabel('Reason').fill('cohort 1 of the retries rollout');
  await shot(page, info, '21a-retry-cohort');
  await cohort.getByRole('button', { name: 'Apply to cohort' }).click();
  await expect(page.getByText(/no drill run passed on this build/).first()).toBeVisible();
  await expect(page.getByText(/clinic-a: no approved evidence bundle/).first()).toBeVisible();
  await shot(page, info, '21b-retry-cohort-refused');
  await page.goto('/tenants');
  await expect(page.locator('#cohort label', { hasText: 'clinic-a' })).toContainText('retries disabled');
});

test('the administrator records an endpoint\'s retention, never below the redelivery horizon', async ({ page }, info) => {
  await signIn(page, 'root');
  await page.getByRole('link', { name: 'Retention' }).click();
  await expect(page).toHaveURL(/\/retention$/);
  const row = page.locator('#endpoints tr', { hasText: 'clinic-a / reminders' });
  // 90 d: the default covers Svix's manual resend window as well as the horizon.
  await expect(row).toContainText('90 d');
  await expect(row).toContainText('7 d');
  const form = page.locator('#change-retention');
  await form.getByLabel('Endpoint').selectOption('clinic-a/reminders');
  await form.getByLabel('Keep claims for').fill('12h');
  await form.getByLabel('Reason').fill('shorter');
  await form.getByRole('button', { name: 'Record decision' }).click();
  await expect(page.getByText(/below the standard-webhooks redelivery horizon of 2 d/)).toBeVisible();
  // Each horizon names its source: the sender's published retry schedule.
  await expect(page.locator('#horizons tr', { hasText: 'standard-webhooks' })).toContainText('27.6 h');
  // Each horizon also names the sender's manual resend window and its source.
  await expect(page.locator('#horizons tr', { hasText: 'standard-webhooks' })).toContainText('docs.svix.com');
  // Below the manual resend window: refused until the risk is accepted.
  await page.goto('/retention');
  await form.getByLabel('Endpoint').selectOption('clinic-a/reminders');
  await form.getByLabel('Keep claims for').fill('14d');
  await form.getByLabel('Keep bodies for').fill('2d');
  await form.getByLabel('Reason').fill('data minimisation agreed with the clinic');
  await form.getByRole('button', { name: 'Record decision' }).click();
  await expect(page.getByText(/below the standard-webhooks manual resend window of 90 d/)).toBeVisible();
  await page.goto('/retention');
  await form.getByLabel('Endpoint').selectOption('clinic-a/reminders');
  await form.getByLabel('Keep claims for').fill('14d');
  await form.getByLabel('Keep bodies for').fill('2d');
  await form.getByLabel('Reason').fill('data minimisation agreed with the clinic');
  await form.getByLabel(/Accept the risk/).check();
  await form.getByRole('button', { name: 'Record decision' }).click();
  await expect(page.locator('#endpoints tr', { hasText: 'clinic-a / reminders' })).toContainText('14 d');
  await expect(page.locator('#endpoints tr', { hasText: 'clinic-a / reminders' })).toContainText('below manual resend');
  await expect(page.locator('#endpoints tr', { hasText: 'clinic-a / reminders' })).toContainText('data minimisation agreed with the clinic');
  await shot(page, info, '22-retention');
});

test('the administrator rotates the key-encryption key and every sealed row moves to it', async ({ page }, info) => {
  await signIn(page, 'root');
  await page.getByRole('link', { name: 'KEKs' }).click();
  await expect(page).toHaveURL(/\/kek$/);
  await expect(page.getByRole('heading', { name: 'Key-encryption keys' })).toBeVisible();
  const v1 = page.locator('#versions tr[data-version="1"]');
  await expect(v1).toContainText('newest');
  await expect(page.locator('#versions')).toContainText('Every sealed row is under version 1');
  await page.getByRole('button', { name: 'Rotate: add a version and reseal everything' }).click();
  // The rewrap runs in the background; the page follows it on its own.
  await expect(page.locator('#rewrap')).toContainText(/Done: \d+ rows resealed under version 2/, { timeout: 20_000 });
  await expect(page.locator('#versions tr[data-version="2"]')).toContainText('newest');
  await expect(page.locator('#versions')).toContainText('Every sealed row is under version 2');
  await expect(page.locator('#versions tr[data-version="1"] td').nth(6)).toHaveText('0');
  await shot(page, info, '30-kek-rotated');
  // Version 1 seals nothing now, but the new version is a moment old: an
  // instance may not have loaded it yet, so retiring waits.
  await page.locator('#versions tr[data-version="1"]').getByRole('button', { name: 'Retire' }).click();
  await expect(page.getByText(/added less than a minute ago/)).toBeVisible();
  await expect(page.locator('#versions tr[data-version="1"]')).toBeVisible();
});

test('the reviewer runs the drills, exports the evidence, reads the printable page and signs off', async ({ page }, info) => {
  test.setTimeout(180_000);
  await signIn(page, 'rita');
  await page.getByRole('link', { name: 'Evidence' }).click();
  await expect(page).toHaveURL(/\/evidence$/);
  await expect(page.getByText('No drill has run on this deployment yet.')).toBeVisible();
  await shot(page, info, '23-evidence-before');
  await page.getByRole('button', { name: 'Run drills' }).click();
  // Live progress: the run is shown while it runs, then its verdict.
  const run = page.locator('.drill-run');
  await expect(run).toBeVisible();
  if ((await run.getAttribute('data-status')) === 'running') await shot(page, info, '24-drills-running');
  await expect(run).toHaveAttribute('data-status', 'finished', { timeout: 120_000 });
  for (const drill of ['concurrent_duplicates', 'interrupted_before_commit', 'lost_ack', 'unknown_tenant', 'invalid_signature', 'replay', 'identity_conflict', 'scheme_verification']) {
    await expect(page.locator(`tr[data-drill="${drill}"]`)).toHaveAttribute('data-passed', 'true');
  }
  await expect(run).toContainText('all drills passed');
  await shot(page, info, '25-drills-passed');

  // An operator slip the bundle must catch: the master key file left
  // group-readable. It is a critical finding the reviewer has to
  // acknowledge, by id and with a comment, before approving.
  const masterKey = join(serverState(info).dataDir, 'master.key');
  chmodSync(masterKey, 0o640);
  await page.getByRole('button', { name: 'Export a fresh bundle' }).click();
  await expect(page.getByText(/Exported a new bundle/)).toBeVisible();
  chmodSync(masterKey, 0o600);
  const digest = ((await page.locator('[data-digest]').textContent()) ?? '').trim();
  expect(digest).toMatch(/^[0-9a-f]{64}$/);
  await expect(page.locator('tr[data-constraint="claim_unique"]')).toHaveAttribute('data-present', 'true');
  await expect(page.locator('#bundle')).toContainText('clinic-a');
  await shot(page, info, '26-bundle');

  // The printable page is the signed file itself.
  const href = await page.getByRole('link', { name: 'Open the printable page' }).getAttribute('href');
  expect(href).toBe(`/evidence/files/${digest}/evidence.html`);
  const printable = await page.context().newPage();
  await printable.goto(href!);
  await expect(printable.getByRole('heading', { name: 'Signet sign-off evidence' })).toBeVisible();
  await expect(printable.getByText('claim_unique', { exact: true })).toBeVisible();
  await printable.emulateMedia({ media: 'print' });
  await printable.screenshot({ path: `screenshots/${info.project.name}-27-printable.png`, fullPage: true });
  await printable.close();
  const json = await page.request.get(`/evidence/files/${digest}/evidence.json`);
  expect(json.status()).toBe(200);
  expect((await json.json()).drills.latest.passed).toBe(true);

  const form = page.locator('#sign-off');
  await expect(page.locator('ul.findings').first()).toContainText('master_key_file_exposed');
  await form.getByLabel('Approve').check();
  await form.getByLabel('Comment').fill('Drills passed on this deployment; credential map and constraints reviewed');
  // Approving without the acknowledgement is refused, naming the finding.
  await form.getByRole('button', { name: 'Record sign-off' }).click();
  await expect(page.getByRole('alert').filter({ hasText: 'master_key_file_exposed' })).toBeVisible();
  await shot(page, info, '27a-signoff-needs-acknowledgement');
  await form.getByLabel('Approve').check();
  await form.getByLabel('Comment').fill('Drills passed on this deployment; credential map and constraints reviewed');
  await form.locator('textarea[name="acknowledge[master_key_file_exposed]"]').fill('Mode was 0640 for the export only; restored to 0600 and checked');
  await form.getByRole('button', { name: 'Record sign-off' }).click();
  await expect(page.getByText('Sign-off recorded')).toBeVisible();
  await expect(page.locator('#history tr[data-decision="approved"]')).toHaveCount(1);
  await expect(page.locator('#history tr[data-decision="approved"] td[data-acknowledged="1"]')).toBeVisible();
  await expect(page.locator('#since-approval')).toContainText('Nothing changed');
  await shot(page, info, '28-signed-off');
});

test('on-call cannot open the sign-off evidence', async ({ page }, info) => {
  await signIn(page, 'otto');
  await expect(page.getByRole('link', { name: 'Evidence' })).toHaveCount(0);
  await page.goto('/evidence');
  await expect(page.getByText(/role does not allow/i)).toBeVisible();
  await shot(page, info, '29-evidence-oncall');
});

test('after drills and sign-off the administrator enables retries for a cohort, then switches one tenant off and rolls it back', async ({ page, request }, info) => {
  await signIn(page, 'root');
  await page.goto('/tenants');
  const cohort = page.locator('#cohort');
  await expect(cohort.getByTestId('cohort-drills')).toContainText('all drills passed');
  await cohort.locator('label', { hasText: 'clinic-a' }).getByRole('checkbox').check();
  await cohort.getByLabel('Policy').selectOption('enabled');
  await cohort.getByLabel('Reason').fill('cohort 1 of the retries rollout');
  await cohort.getByRole('button', { name: 'Apply to cohort' }).click();
  await expect(page.locator('#cohort label', { hasText: 'clinic-a' })).toContainText('retries enabled');
  await expect(page.locator('#cohort label', { hasText: 'clinic-b' })).toContainText('retries disabled');
  await page.goto('/tenants/clinic-a');
  const card = page.locator('#retry-policy');
  await expect(card).toContainText('retries enabled');
  await card.getByLabel('Reason for the change').fill('database failover drill');
  await card.getByRole('button', { name: 'Disable retries' }).click();
  await expect(page.locator('#retry-policy')).toContainText('retries disabled');
  await expect(page.locator('#retry-policy')).toContainText('database failover drill');
  await page.locator('#retry-policy').getByLabel('Rollback reason').fill('drill over');
  await page.locator('#retry-policy').getByRole('button', { name: 'Roll back' }).click();
  await expect(page.locator('#retry-policy')).toContainText('retries enabled');
  await expect(page.locator('#retry-policy')).toContainText('rollback to v2: drill over');
  await shot(page, info, '21-retry-policy');

  // Traffic for the cohort, one delivery retried by the provider: the
  // reviewer's next bundle checks each event since enabling was applied once.
  const payload = JSON.stringify({ type: 'reminder.created', data: { reminder_id: 'r-cohort', send_at: '2027-01-05T09:00:00Z' } });
  expect((await deliver(request, 'msg_cohort', payload)).status).toBe(200);
  // The provider's retry is signed afresh (a new timestamp): a duplicate, acknowledged.
  await page.waitForTimeout(1100);
  expect((await deliver(request, 'msg_cohort', payload)).body.status).toBe('duplicate');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await signIn(page, 'rita');
  await page.goto('/evidence');
  await page.getByRole('button', { name: 'Export a fresh bundle' }).click();
  await expect(page.getByText(/Exported a new bundle/)).toBeVisible();
  const check = page.locator('tr[data-cohort="clinic-a"]');
  await expect(check).toHaveAttribute('data-breaches', '0');
  await expect(check).toContainText('none');
  await expect(check.locator('td').nth(2)).not.toHaveText('0');
  await expect(page.locator('tr[data-cohort="clinic-b"]')).toHaveCount(0);
  await shot(page, info, '28a-cohort-check');
});

test('a crafted sign-in link shows none of its text and cannot send the user off-site', async ({ page, baseURL }) => {
  const err = encodeURIComponent(JSON.stringify({ code: 'bad_credentials', message: 'Account locked: call +1 555 0100' }));
  await page.goto(`/login?__path=/fn/login&__err=${err}&next=${encodeURIComponent('/\t/evil.example')}`);
  await expect(page.getByRole('alert')).toContainText('Sign-in failed');
  expect(await page.content()).not.toContain('555 0100');
  // A real wrong password still says what happened.
  await page.getByLabel('Username').fill('root');
  await page.getByLabel('Password').fill('not the password at all');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByText(/wrong username or password|invalid username or password/i)).toBeVisible();
  await page.getByLabel('Username').fill('root');
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('button', { name: 'Sign out' })).toBeVisible();
  expect(new URL(page.url()).origin).toBe(new URL(baseURL!).origin);
});
