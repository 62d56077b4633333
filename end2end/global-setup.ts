// Starts one real `signet serve` per project on a fresh SQLite data dir and
// records the one-time setup link it prints, exactly as an operator sees it.
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(__dirname, '..');
// Built by `scripts/build-console.sh`; overridable when the target dir lives elsewhere.
export const signetBin = process.env.SIGNET_BIN ?? join(root, 'target/debug/signet');
const siteRoot = process.env.LEPTOS_SITE_ROOT ?? join(root, 'target/site');
export const stateDir = join(__dirname, '.state');
// E2E_PORT_BASE moves the servers (default 3101-3105), so two
// checkouts can run their journeys side by side.
const base = Number(process.env.E2E_PORT_BASE ?? 3100);
const servers = [
  { project: 'ssr', port: base + 1 },
  { project: 'hydrated', port: base + 2 },
  { project: 'interop', port: base + 3 },
  { project: 'onboarding-ssr', port: base + 4 },
  { project: 'onboarding-hydrated', port: base + 5 },
];

function start(project: string, port: number): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), `signet-e2e-${project}-`));
  const child = spawn(signetBin, ['serve'], {
    cwd: root,
    env: {
      ...process.env,
      SIGNET_DATA_DIR: dataDir,
      SIGNET_ADDR: `127.0.0.1:${port}`,
      SIGNET_METRICS_ADDR: '127.0.0.1:0',
      LEPTOS_SITE_ROOT: siteRoot,
      SIGNET_LOG: 'info',
      // Debug builds only: a pause after each bulk-released event, so the
      // journeys can watch the progress move.
      SIGNET_FAULTS: 'stall_bulk_entry_ms=700',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const log: string[] = [];
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`signet (${project}) did not start:\n${log.join('')}`)), 30_000);
    const onData = (chunk: Buffer) => {
      const text = chunk.toString();
      log.push(text);
      const m = log.join('').match(/(http:\/\/\S+\/setup\?token=\S+)/);
      if (m && log.join('').includes('Signet is listening')) {
        clearTimeout(timer);
        writeFileSync(
          join(stateDir, `${project}.json`),
          JSON.stringify({ pid: child.pid, setupUrl: m[1], dataDir, baseURL: `http://127.0.0.1:${port}` }),
        );
        ok();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (c: Buffer) => log.push(c.toString()));
    child.on('exit', (code) => fail(new Error(`signet (${project}) exited with ${code}:\n${log.join('')}`)));
    child.unref();
  });
}

export default async function globalSetup() {
  mkdirSync(stateDir, { recursive: true });
  mkdirSync(join(__dirname, 'screenshots'), { recursive: true });
  await Promise.all(servers.map((s) => start(s.project, s.port)));
}
