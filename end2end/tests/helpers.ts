import { expect, Page, test as base, TestInfo } from '@playwright/test';
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const PASSWORD = 'correct horse battery staple';

/**
 * `test` whose pages fail on any browser console error or uncaught
 * exception (hydration errors, CSP violations), and which, with JavaScript
 * on, proves every page it loads was actually hydrated.
 */
export const test = base.extend({
  page: async ({ page, javaScriptEnabled }, use, testInfo) => {
    const errors: string[] = [];
    page.on('console', (m) => {
      // A refused form (409 conflict, 422 invalid input) is an answer the
      // page shows to the user, not a fault; Chrome still logs it.
      if (m.type() === 'error' && !/the server responded with a status of (409|422)/.test(m.text())) errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('response', async (r) => {
      if (r.status() === 404 && r.request().resourceType() !== 'document') errors.push(`404 for ${r.url()}`);
      // Every rendered page carries its own nonce policy; name any that does not.
      if (r.request().resourceType() === 'document' && (r.status() < 300 || r.status() >= 400)) {
        const csp = (await r.allHeaders().catch(() => ({}) as Record<string, string>))['content-security-policy'] ?? '';
        // Not a failure (the server sends a fallback page policy), but named
        // in the test output so the cause can be found.
        if (!csp.includes('nonce-')) console.warn(`page without its nonce CSP: ${r.request().method()} ${r.url()} ${r.status()} csp=${csp}`);
      }
    });
    if (javaScriptEnabled) {
      page.on('load', async () => {
        await expect(page.locator('body[data-hydrated="true"]')).toBeAttached({ timeout: 10_000 }).catch((e) => errors.push(`not hydrated: ${page.url()}: ${e}`));
      });
    }
    await use(page);
    if (errors.length) {
      // Also written where scripts/test.sh prints it last, so a truncated CI log still shows the cause.
      appendFileSync(join(__dirname, '..', 'console-errors.txt'), `${testInfo.titlePath.join(' › ')}:\n  ${errors.join('\n  ')}\n`);
    }
    expect(errors, 'browser console errors').toEqual([]);
  },
});

export type ServerState = { setupUrl: string; baseURL: string; dataDir: string };

export function serverState(info: TestInfo): ServerState {
  return JSON.parse(readFileSync(join(__dirname, '..', '.state', `${info.project.name}.json`), 'utf8'));
}

/** Saves a full-page screenshot named for the project and step, for review. */
export async function shot(page: Page, info: TestInfo, step: string) {
  await page.screenshot({ path: join(__dirname, '..', 'screenshots', `${info.project.name}-${step}.png`), fullPage: true });
}

export async function signIn(page: Page, username: string) {
  await page.goto('/login');
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('button', { name: 'Sign out' })).toBeVisible();
}
