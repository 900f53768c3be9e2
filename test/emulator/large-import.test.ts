import { createWriteStream, openAsBlob, writeFileSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { FormData } from 'undici';
import { describe, expect, it } from 'vitest';
import { client, getToken, withEmulator } from './helpers.js';
import { MAX_IMPORT_FILE_BYTES } from '../../src/emulator/contract.js';

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

/**
 * The limit is inclusive (CONTRACT.md: "at most 128 MB", read as 128,000,000 bytes): a file of
 * exactly 128,000,000 bytes is accepted and processed, one byte more is refused with 413. The files
 * are a small valid document padded with JSON whitespace to the exact size.
 */
describe('the import file limit at its exact boundary', () => {
  it('128,000,000 bytes: 202 and finished; 128,000,001 bytes: 413 and no job', async () => {
    expect(MAX_IMPORT_FILE_BYTES).toBe(128_000_000);
    const dir = await mkdtemp(join(tmpdir(), 'emulator-boundary-'));
    const doc = '{"items":[{"timestamp":"2026-02-01T00:00:00.000Z","machine_variable_id":"mvr_gen_1","value":42}]}';
    const padded = (size: number) => {
      const path = join(dir, `${size}.json`);
      const buf = Buffer.alloc(size, 0x20);
      buf.write(doc, 0, 'utf8');
      buf[size - 1] = 0x0a;
      writeFileSync(path, buf);
      return path;
    };
    const em = await withEmulator({ jobProcessingDelayMs: 0 });
    try {
      const c = client(em, await getToken(em));
      const atLimit = padded(128_000_000);
      expect((await stat(atLimit)).size).toBe(128_000_000);
      const form = new FormData();
      form.append('file', await openAsBlob(atLimit, { type: 'application/json' }), 'items.json');
      const ok = await c.upload('/machine-data/import-jobs', form);
      expect(ok.status, ok.text).toBe(202);
      expect(ok.body.items_received).toBe(1);
      expect(await em.waitForJob(ok.body.job_id, 60_000)).toMatchObject({ status: 'finished', items_accepted: 1, items_rejected: 0 });
      expect(em.value('mvr_gen_1', '2026-02-01T00:00:00.000Z')).toEqual({ value: 42, writes: 1 });
      await rm(atLimit);

      const over = padded(128_000_001);
      const form2 = new FormData();
      form2.append('file', await openAsBlob(over, { type: 'application/json' }), 'items.json');
      const refused = await c.upload('/machine-data/import-jobs', form2);
      expect(refused.status).toBe(413);
      expect(refused.body).toEqual({ code: 'payload_too_large', message: 'file is over the limit of 128,000,000 bytes' });
      expect(em.importJobs()).toHaveLength(1);
    } finally {
      await em.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
