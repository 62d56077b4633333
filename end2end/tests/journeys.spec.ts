// The console's core journeys, run once with JavaScript off (plain SSR form
// posts) and once hydrated. Each project has its own fresh server.
import { expect } from '@playwright/test';
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
    await page.getByLabel('Event types').fill('reminder.created, otp.requested');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await expect(page.getByText(`/hooks/${slug}/reminders`)).toBeVisible();
  }
  await shot(page, info, '03-tenant-with-endpoint');
  for (const [username, role, tenant] of [
    ['alice', 'clinic-admin', 'clinic-a'],
    ['bob', 'clinic-admin', 'clinic-b'],
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
  await page.getByLabel(/Reason/).fill('rotation test complete');
  await shot(page, info, '14-revoke-confirm');
  await page.getByRole('button', { name: 'Revoke key' }).click();
  await expect(page).toHaveURL(/\/tenants\/clinic-a/);
  await expect(page.locator('tr', { hasText: newKey })).toContainText('revoked');
  await shot(page, info, '15-revoked');
  await page.goto('/audit');
  await expect(page.getByText('key.revoke').first()).toBeVisible();
  await expect(page.getByText('Hash chain verified')).toHaveCount(0); // clinic admins do not see the global chain status
  expect(await page.content()).not.toContain(newSecret);
  await shot(page, info, '16-audit');
});
