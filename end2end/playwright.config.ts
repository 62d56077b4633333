import { defineConfig } from '@playwright/test';

// Debian's Chromium; downloading a browser is not possible (or wanted) here.
const launchOptions = {
  executablePath: '/usr/bin/chromium',
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
  ],
};

const base = Number(process.env.E2E_PORT_BASE ?? 3100);

// Each project gets its own server and database (see global-setup.ts), so
// both can bootstrap an administrator from scratch.
export default defineConfig({
  testDir: './tests',
  timeout: 60_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 2,
  reporter: [['list']],
  globalSetup: './global-setup.ts',
  globalTeardown: './global-teardown.ts',
  use: {
    launchOptions,
    screenshot: 'only-on-failure',
    trace: 'retain-on-failure',
  },
  projects: [
    { name: 'ssr', testMatch: /journeys\.spec\.ts/, use: { javaScriptEnabled: false, baseURL: `http://127.0.0.1:${base + 1}` } },
    { name: 'hydrated', testMatch: /journeys\.spec\.ts/, use: { javaScriptEnabled: true, baseURL: `http://127.0.0.1:${base + 2}` } },
    // Onboarding a provider (issue 26 item 3), on servers of their own.
    { name: 'onboarding-ssr', testMatch: /onboarding\.spec\.ts/, use: { javaScriptEnabled: false, baseURL: `http://127.0.0.1:${base + 4}` } },
    { name: 'onboarding-hydrated', testMatch: /onboarding\.spec\.ts/, use: { javaScriptEnabled: true, baseURL: `http://127.0.0.1:${base + 5}` } },
    // The receiver against the providers' official signing libraries (no browser).
    { name: 'interop', testMatch: /interop\.spec\.ts/, use: { baseURL: `http://127.0.0.1:${base + 3}` } },
  ],
});
