import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

export default async function globalTeardown() {
  const stateDir = join(__dirname, '.state');
  for (const f of readdirSync(stateDir)) {
    const { pid, dataDir } = JSON.parse(readFileSync(join(stateDir, f), 'utf8'));
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      /* already gone */
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}
