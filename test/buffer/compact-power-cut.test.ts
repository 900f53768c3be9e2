import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readAllSamples } from '../../src/buffer/chunks/store.js';
import { silentLogger } from '../../src/core/logger.js';
import { GATEWAY_SCHEMAS } from '../../src/runtime/store-schemas.js';
import { openBufferDatabase } from '../../src/store/file/database.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

type Sample = { variable: string; ts: number; value: number };
const key = (s: Sample) => `${s.variable}|${s.ts}|${Object.is(s.value, -0) ? '-0' : s.value}`;

/** Runs the child until it copies the file at `moment` of the merge and dies; returns what it expected and the copy's path. */
async function cutAt(moment: 'insert-1' | 'insert-mid' | 'committed'): Promise<{ expected: { samples: Sample[]; chunks: number; merged: number }; snapshot: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-compact-cut-'));
  dirs.push(dir);
  const snapDir = join(dir, 'snap');
  mkdirSync(snapDir);
  const child = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'fixtures', 'compact-cut.ts'), join(dir, 'buffer.db'), snapDir, moment], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += String(d)));
  child.stderr!.on('data', (d) => (out += String(d)));
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, sig) => resolve(sig)));
  // The child dies by its own SIGKILL at the moment; any other end means no merge came (or it failed).
  expect(signal, `child output:\n${out}`).toBe('SIGKILL');
  expect(existsSync(join(snapDir, 'buffer.db'))).toBe(true);
  return { expected: JSON.parse(readFileSync(join(snapDir, 'expected.json'), 'utf8')), snapshot: join(snapDir, 'buffer.db') };
}

/** Frames of a WAL file after its last commit frame (pages of a transaction that had not committed). */
function uncommittedFrames(wal: string): number {
  if (!existsSync(wal)) return 0;
  const b = readFileSync(wal);
  const pageSize = b.readUInt32BE(8);
  const salt = b.subarray(16, 24);
  let frames = 0;
  let lastCommit = 0;
  for (let off = 32; off + 24 + pageSize <= b.length && b.subarray(off + 8, off + 16).equals(salt); off += 24 + pageSize) {
    frames++;
    if (b.readUInt32BE(off + 4) !== 0) lastCommit = frames;
  }
  return frames - lastCommit;
}

/** Opens the copy as the gateway would after the power came back (WAL recovery), and reads it. */
function reopen(path: string): { samples: Sample[]; chunks: number; integrity: string } {
  const { db } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
  try {
    return {
      samples: readAllSamples(db).map(({ variable, ts, value }) => ({ variable, ts, value })),
      chunks: db.prepare('SELECT count(*) FROM chunks').pluck(true).get() as number,
      integrity: db.pragma('integrity_check', { simple: true }) as string,
    };
  } finally {
    db.close();
  }
}

/**
 * Power cuts aimed at a compaction that merges chunks cut behind its cursor (a pass over the
 * windows it had passed, once an import range was finished there): the disk keeps every write
 * made so far, the merge's uncommitted pages included. The merge replaces the window's chunks in
 * one transaction, so after the cut the file holds either all the old chunks or all the merged
 * ones, every sample exactly once.
 */
describe('power cut during a compaction pass (B2, B7)', () => {
  for (const moment of ['insert-1', 'insert-mid'] as const) {
    it(`a cut ${moment === 'insert-1' ? 'right after the old chunks were deleted, before the first merged one was written' : 'halfway through writing the merged chunks'} leaves the old chunks, every sample once`, async () => {
      const { expected, snapshot } = await cutAt(moment);
      // The cut lands inside the merge's transaction: its first pages are in the WAL, uncommitted.
      if (moment === 'insert-mid') expect(uncommittedFrames(`${snapshot}-wal`)).toBeGreaterThan(0);
      const after = reopen(snapshot);
      expect(after.integrity).toBe('ok');
      expect(after.chunks).toBe(expected.chunks);
      expect(after.samples.map(key).sort()).toEqual(expected.samples.map(key).sort());
    }, 120_000);
  }

  it('a cut right after the merge committed leaves the merged chunks, every sample once', async () => {
    const { expected, snapshot } = await cutAt('committed');
    const after = reopen(snapshot);
    expect(after.integrity).toBe('ok');
    // Each variable's two pieces (and any other small chunks of the window) became one chunk again.
    expect(after.chunks).toBeLessThan(expected.chunks);
    expect(after.chunks).toBeLessThanOrEqual(expected.merged);
    expect(after.samples.map(key).sort()).toEqual(expected.samples.map(key).sort());
  }, 120_000);
});
