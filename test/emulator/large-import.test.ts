import { createWriteStream, openAsBlob } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { FormData } from 'undici';
import { describe, expect, it } from 'vitest';
import { client, getToken, withEmulator } from './helpers.js';

/**
 * CONTRACT.md: import files up to 128,000,000 bytes (≈1.2 M items) must be processed. The file is
 * written to disk and uploaded as a stream, so the test itself never holds it in memory either.
 */
describe('a 128 MB import file', () => {
  it('is received, processed and stored in a few seconds', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'emulator-large-'));
    const path = join(dir, 'items.json');
    const start = Date.parse('2026-01-01T00:00:00.000Z');
    const ws = createWriteStream(path);
    ws.write('{"items":[');
    let n = 0;
    let bytes = 10;
    const limit = 128_000_000 - 100;
    let chunk = '';
    for (;;) {
      const line = `${n ? ',' : ''}{"timestamp":"${new Date(start + n * 10).toISOString()}","machine_variable_id":"mvr_gen_${(n % 20) + 1}","value":${(n % 1000) / 8}}`;
      if (bytes + line.length + 2 > limit) break;
      chunk += line;
      bytes += line.length;
      n++;
      if (chunk.length > 1 << 20) {
        if (!ws.write(chunk)) await once(ws, 'drain');
        chunk = '';
      }
    }
    ws.end(`${chunk}]}`);
    await once(ws, 'finish');
    const size = (await stat(path)).size;
    expect(size).toBeLessThanOrEqual(128_000_000);
    expect(size).toBeGreaterThan(127_000_000);
    expect(n).toBeGreaterThan(1_100_000);

    const em = await withEmulator({ jobProcessingDelayMs: 0 });
    try {
      const c = client(em, await getToken(em));
      const form = new FormData();
      form.append('file', await openAsBlob(path, { type: 'application/json' }), 'items.json');
      const t0 = performance.now();
      const r = await c.upload('/machine-data/import-jobs', form);
      const uploaded = performance.now();
      expect(r.status).toBe(202);
      expect(r.body.items_received).toBe(n);
      const done = await em.waitForJob(r.body.job_id, 60_000);
      const finished = performance.now();
      expect(done).toMatchObject({ status: 'finished', items_accepted: n, items_rejected: 0, errors: [] });
      expect(em.stats().values_stored).toBe(n);
      expect(em.value('mvr_gen_1', new Date(start).toISOString())).toEqual({ value: 0, writes: 1 });
      console.log(`128 MB import: ${n} items, ${size} bytes; upload ${(uploaded - t0).toFixed(0)} ms, processing ${(finished - uploaded).toFixed(0)} ms; rss ${(process.memoryUsage().rss / 1e6).toFixed(0)} MB`);
    } finally {
      await em.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
