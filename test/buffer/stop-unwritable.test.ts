import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';
import { waitFor } from '../helpers/wait.js';

const open: TestBuffer[] = [];
afterEach(async () => {
  for (const b of open.splice(0)) await b.destroy().catch(() => undefined);
});

describe('stopping while the disk refuses writes (issue 12 §1)', () => {
  it('counts, logs and reports the samples held in memory that are discarded', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const stream = new Writable({
      write(chunk, _e, cb) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        cb();
      },
    });
    const b = openTestBuffer({ logger: createLogger({ level: 'debug', format: 'json', destination: stream }) });
    open.push(b);
    await b.buffer.append([{ variable: 'mvr_a', ts: 1_700_000_000_000, value: 1 }]);
    // Every write now fails (as on a read-only or broken file system); samples stay in memory.
    b.db.pragma('query_only = ON');
    const held = b.buffer.append(Array.from({ length: 500 }, (_, i) => ({ variable: 'mvr_a', ts: 1_700_000_000_001 + i, value: i })));
    held.catch(() => undefined);
    await waitFor(() => !b.buffer.stats().writable, { what: 'buffer unwritable' });
    expect(b.buffer.stats().pendingSamples).toBe(500);
    await b.buffer.close();
    await expect(held).rejects.toThrow(/closed before/);
    await expect(held).rejects.toMatchObject({ code: 'BUFFER_CLOSED', samples: 500 });
    expect(b.buffer.discardedAtClose).toBe(500);
    const line = lines.find((l) => l.discarded_samples === 500);
    expect(line?.msg).toMatch(/500 samples held in memory are discarded/);
    const counted = (await b.metrics.bufferDroppedSamples.get()).values.find((v) => v.labels.policy === 'unwritable_at_stop');
    expect(counted?.value).toBe(500);
  });
});
