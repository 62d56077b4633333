import { expect, Page, TestInfo } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const PASSWORD = 'correct horse battery staple';

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
