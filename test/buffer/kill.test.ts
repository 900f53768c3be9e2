import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { openTestBuffer } from '../helpers/buffer.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/**
 * A child process appends batches and prints the last value of each batch once `append` resolved
 * (= committed). The parent kills it with SIGKILL mid-stream and checks that every value the child
 * reported committed is in the file after reopening.
 */
describe('buffer durability under SIGKILL', () => {
  it('loses nothing that was committed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-kill-'));
    dirs.push(dir);
    const path = join(dir, 'buffer.db');
    const child = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'fixtures', 'append-forever.ts'), path], { stdio: ['ignore', 'pipe', 'inherit'] });
    let lastCommitted = -1;
    const lines = createInterface({ input: child.stdout! });
    const killed = new Promise<void>((resolve) => {
      lines.on('line', (line) => {
        const n = Number(line);
        if (Number.isFinite(n)) lastCommitted = n;
        // Kill once plenty is committed, at whatever point the child is in its next transaction.
        if (lastCommitted >= 30_000 && !child.killed) child.kill('SIGKILL');
      });
      child.on('exit', () => resolve());
    });
    await killed;
    expect(lastCommitted).toBeGreaterThanOrEqual(30_000);
    const reopened = openTestBuffer({ path, dir });
    try {
      const values = new Set(reopened.rows().map((r) => r.value));
      for (let v = 0; v <= lastCommitted; v++) {
        if (!values.has(v)) throw new Error(`value ${v} was reported committed but is missing after SIGKILL`);
      }
      const check = reopened.db.pragma('integrity_check', { simple: true });
      expect(check).toBe('ok');
    } finally {
      await reopened.close();
    }
  });
});
