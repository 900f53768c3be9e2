import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatReport, runCrashHarness } from '../../scripts/lib/crash-harness.js';

const ROOT = join(import.meta.dirname, '..', '..');

/**
 * The crash-safety harness (scripts/lib/crash-harness.ts) at CI size: the real gateway as a child
 * process, killed with SIGKILL 20 times at random moments and inside import-job phases, with
 * faults injected at the emulator. `scripts/crash-soak 200` runs the same for the record.
 */
describe('crash safety', () => {
  it('loses nothing committed across 20 SIGKILL cycles, and every buffer file passes integrity_check', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-crash-'));
    try {
      const report = await runCrashHarness({
        cycles: 20,
        dir,
        seed: 20_261_122,
        // `npm test` builds first, so CI runs the compiled gateway (faster start-up).
        useDist: process.env.CI === 'true' && existsSync(join(ROOT, 'dist', 'cli.js')),
      });
      process.stdout.write(`${formatReport(report)}\n`);
      expect(report.cycles).toBe(20);
      expect(report.lost, report.lostExamples.join('; ')).toBe(0);
      expect(report.integrity.failed).toEqual([]);
      expect(report.integrity.ok).toBe(21);
      expect(report.unexpected).toBe(0);
      expect(report.samplesCommitted).toBeGreaterThan(10_000);
      // The kills reached the import-job phases, not only the sync path.
      const jobPhases = Object.entries(report.killsByPhase).filter(([k]) => k.startsWith('import_')).reduce((n, [, v]) => n + v, 0);
      expect(jobPhases).toBeGreaterThan(0);
      expect(report.importJobs).toBeGreaterThan(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
