import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');

describe('generated documentation', () => {
  it('docs/configuration.md and the README metrics table match the code (run: npx tsx scripts/gen-docs.ts)', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts', 'gen-docs.ts'), '--check'], { encoding: 'utf8', cwd: ROOT });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
