// Onboarding a provider from the console (issue 26 item 3), once with
// JavaScript off and once hydrated, each on a fresh server of its own: a
// clinic admin opens a standard-webhooks endpoint, reads what the provider
// must send, and, once its key is approved, sends a test delivery through
// the real receiver and reads each gate's outcome. Then the same for a
// sender with its own format: an `hmac` endpoint with the `dvir` preset.
import { expect, Locator, Page } from '@playwright/test';
import { PASSWORD, serverState, shot, signIn, test } from './helpers';

test.describe.configure({ mode: 'serial' });

let keyId = '';
let dvirKeyId = '';

test('the administrator sets up a clinic, its endpoint and its people', async ({ page }, info) => {
  const { setupUrl } = serverState(info);
  await page.goto(setupUrl);
  await page.getByLabel('Username').fill('root');
  await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await page.getByLabel('Confirm password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Create administrator' }).click();
  await expect(page).toHaveURL(/\/login\?setup=done/);
  await signIn(page, 'root');
  await page.goto('/tenants');
  await page.getByLabel('Slug').fill('clinic-a');
  await page.getByLabel('Display name').fill('Clinic A');
  await page.getByRole('button', { name: 'Create tenant' }).click();
  await expect(page).toHaveURL(/\/tenants\/clinic-a$/);
  await page.getByLabel('Endpoint slug').fill('reminders');
  await page.getByLabel('Scheme').selectOption('standard-webhooks');
  await page.getByLabel('Event types').fill('reminder.created');
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  await expect(page.getByText('/hooks/clinic-a/reminders')).toBeVisible();
  for (const [username, role, tenant] of [
    ['alice', 'clinic-admin', 'clinic-a'],
    ['rita', 'reviewer', ''],
  ]) {
    await page.goto('/users');
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Role').first().selectOption(role);
    if (tenant) await page.getByLabel('Tenant').first().fill(tenant);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create user' }).click();
    await expect(page.getByRole('cell', { name: username, exact: true })).toBeVisible();
  }
});

test('a clinic admin reads what the provider must send, before any key works', async ({ page }, info) => {
  await signIn(page, 'alice');
  await expect(page).toHaveURL(/\/tenants\/clinic-a$/);
  await page.getByLabel('Owner').first().fill('reminders-team');
  await page.getByRole('button', { name: 'Provision key' }).first().click();
  await expect(page).toHaveURL(/\/keys\/key_[0-9a-f]+\/secret\?reveal=/);
  keyId = page.url().match(/keys\/(key_[0-9a-f]+)/)![1];

  await page.goto('/tenants/clinic-a');
  await page.getByTestId('onboard-link').click();
  await expect(page).toHaveURL(/\/tenants\/clinic-a\/endpoints\/reminders$/);
  await expect(page.getByRole('heading', { name: 'Onboard a provider' })).toBeVisible();
  await expect(page.getByTestId('hook-url')).toHaveText(/^http:\/\/127\.0\.0\.1:\d+\/hooks\/clinic-a\/reminders$/);
  await expect(page.getByTestId('scheme')).toHaveText('standard-webhooks');
  const headers = page.getByTestId('headers');
  for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
    await expect(headers.getByRole('cell', { name, exact: true })).toBeVisible();
  }
  await expect(headers).toContainText('v1,');
  await expect(page.getByTestId('curl')).toContainText('curl -sS -X POST');
  await expect(page.getByTestId('curl')).toContainText("-H 'webhook-signature: v1,");
  await expect(page.getByTestId('send-command')).toContainText('signet send');
  await expect(page.getByTestId('send-command')).toContainText('--scheme standard-webhooks');
  // The key awaits review: Signet has nothing it may sign with yet.
  await expect(page.getByTestId('test-impossible')).toContainText('no_active_key');
  await expect(page.getByRole('button', { name: 'Send a test delivery' })).toHaveCount(0);
  await shot(page, info, 'o1-onboarding-before-approval');
});

/** Rita, a security reviewer, approves the key's scope from her queue. */
async function approve(page: Page, key: string, comment: string, check?: (item: Locator) => Promise<void>) {
  await signIn(page, 'rita');
  await page.goto('/approvals');
  const item = page.locator('article', { hasText: key });
  if (check) await check(item);
  await item.getByLabel(/Comment/).first().fill(comment);
  await item.getByRole('button', { name: 'Approve' }).click();
  await expect(page.locator('article', { hasText: key })).toHaveCount(0);
}

test('the reviewer approves the key', async ({ page }) => {
  await approve(page, keyId, 'Reminder provider onboarding');
});

test('a clinic admin sends a test delivery and reads each gate', async ({ page }, info) => {
  await signIn(page, 'alice');
  await page.goto('/tenants/clinic-a/endpoints/reminders');
  await expect(page.getByTestId('test-result')).toHaveCount(0);
  await page.getByRole('button', { name: 'Send a test delivery' }).click();
  await expect(page).toHaveURL(/\/tenants\/clinic-a\/endpoints\/reminders\?tested=test_[0-9a-f]+/);
  const result = page.getByTestId('test-result');
  await expect(result).toContainText(keyId);
  const gates = page.getByTestId('gates').locator('tbody tr');
  await expect(gates).toHaveCount(9);
  for (let gate = 1; gate <= 9; gate++) {
    await expect(gates.nth(gate - 1)).toHaveAttribute('data-result', 'passed');
  }
  await expect(gates.nth(3)).toContainText('signature');
  await expect(gates.nth(8)).toContainText('applied');
  await expect(page.getByTestId('test-answer')).toContainText('200');
  await expect(page.getByTestId('test-answer')).toContainText('Nothing of it was kept');
  await shot(page, info, 'o2-test-delivery-gates');

  // A type the key may not send is refused at gate 8, and the page says so.
  await page.getByLabel('Event type').fill('otp.requested');
  await page.getByRole('button', { name: 'Send a test delivery' }).click();
  await expect(gates.nth(7)).toHaveAttribute('data-result', 'failed');
  await expect(gates.nth(7)).toContainText('event_type_not_permitted');
  await expect(gates.nth(8)).toHaveAttribute('data-result', 'not_reached');
  await expect(page.getByTestId('test-answer')).toContainText('403');
  await shot(page, info, 'o3-test-delivery-refused');

  // The action is in the audit log.
  await page.goto('/audit');
  await expect(page.getByText('endpoint.test_delivery').first()).toBeVisible();
});

test('a clinic admin creates an hmac endpoint with the dvir preset', async ({ page }, info) => {
  await signIn(page, 'alice');
  await page.goto('/tenants/clinic-a');
  const form = page.locator('section', { has: page.getByRole('heading', { name: 'New endpoint' }) });
  await expect(form.getByTestId('hmac-profile-fields')).toBeHidden();
  await form.getByLabel('Endpoint slug').fill('dvir');
  await form.getByLabel('Scheme').selectOption('hmac');
  await expect(form.getByTestId('hmac-profile-fields')).toBeVisible();
  // A custom profile with a mistyped field is refused, naming the field; nothing is created.
  await form.locator('textarea[name="hmac_profile"]').fill('{"preset": "dvir", "signature_headr": "X-DVIR-Signature"}');
  await form.getByRole('button', { name: 'Create endpoint' }).click();
  await expect(page.getByText('hmac_profile.signature_headr: unknown field')).toBeVisible();
  await expect(page.locator('#endpoint-dvir')).toHaveCount(0);
  await shot(page, info, 'o4-hmac-profile-refused');

  await page.goto('/tenants/clinic-a');
  await form.getByLabel('Endpoint slug').fill('dvir');
  await form.getByLabel('Scheme').selectOption('hmac');
  await form.locator('select[name="hmac_preset"]').selectOption('dvir');
  await form.getByLabel('Event types').fill('reminder.created');
  await form.getByRole('button', { name: 'Create endpoint' }).click();
  const card = page.locator('#endpoint-dvir');
  await expect(card.getByText('/hooks/clinic-a/dvir')).toBeVisible();
  await expect(card.getByTestId('endpoint-scheme')).toHaveText('hmac preset dvir');
  await shot(page, info, 'o5-hmac-endpoint-created');

  await card.getByLabel('Owner').first().fill('dvir-delivery');
  await card.getByRole('button', { name: 'Provision key' }).click();
  await expect(page).toHaveURL(/\/keys\/key_[0-9a-f]+\/secret\?reveal=/);
  dvirKeyId = page.url().match(/keys\/(key_[0-9a-f]+)/)![1];
});

test('the reviewer approves the dvir key', async ({ page }) => {
  await approve(page, dvirKeyId, 'DVIR delivery layer, seed 004 format', async (item) => {
    await expect(item).toContainText('hmac');
    // The profile is part of the scope being approved, and the reviewer can read it.
    await expect(item.getByTestId('review-profile')).toContainText('SHA-256');
  });
});

test('a clinic admin reads the dvir profile, sends a test delivery and reads each gate', async ({ page }, info) => {
  await signIn(page, 'alice');
  await page.goto('/tenants/clinic-a/endpoints/dvir');
  await expect(page.getByTestId('scheme')).toHaveText('hmac');
  const profile = page.getByTestId('hmac-profile');
  await expect(profile.getByTestId('profile-preset')).toHaveText('dvir');
  await expect(profile).toContainText('X-DVIR-Signature');
  await expect(profile).toContainText('{timestamp}.{body}');
  await expect(profile).toContainText('HMAC-SHA256');
  await expect(profile.getByTestId('profile-window')).toContainText('300 s');
  await expect(profile).toContainText('/event_id');
  await expect(page.getByTestId('headers').getByRole('cell', { name: 'X-DVIR-Signature', exact: true })).toBeVisible();
  await expect(page.getByTestId('curl')).toContainText("-H 'X-DVIR-Signature: t=");
  await expect(page.getByTestId('send-command')).toContainText('--preset dvir');

  await page.getByRole('button', { name: 'Send a test delivery' }).click();
  await expect(page).toHaveURL(/\/tenants\/clinic-a\/endpoints\/dvir\?tested=test_[0-9a-f]+/);
  await expect(page.getByTestId('test-result')).toContainText(dvirKeyId);
  const gates = page.getByTestId('gates').locator('tbody tr');
  await expect(gates).toHaveCount(9);
  for (let gate = 1; gate <= 9; gate++) {
    await expect(gates.nth(gate - 1)).toHaveAttribute('data-result', 'passed');
  }
  await expect(gates.nth(3)).toContainText('signature');
  await expect(page.getByTestId('test-answer')).toContainText('200');
  await shot(page, info, 'o6-hmac-test-delivery-gates');
});
