import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { call, startHarness, type Harness } from '../annotations/helpers.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 21 §4: `GET /console/api/catalog?refresh=1` made the gateway read both lists of the
 * organisation again, each time, at the 'annotation' priority of the request budget (ahead of
 * sample data), and a cross-site `<img>` could ask for it. Real gateway, real emulator.
 */

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

async function harness(sections: Record<string, unknown> = {}): Promise<{ h: Harness; emu: EmulatorHandle }> {
  const emu = await startEmulator({ port: 0 });
  cleanup.push(() => emu.close());
  const h = await startHarness({ emu, sections });
  cleanup.push(() => h.close());
  return { h, emu };
}

/** Requests the emulator answered on the two catalog lists (every page, every status). */
function catalogReads(emu: EmulatorHandle): number {
  const r = emu.stats().requests;
  const sum = (route: string) => Object.values(r[route] ?? {}).reduce((a, n) => a + n, 0);
  return sum('GET /machines') + sum('GET /machine-variables');
}

const batches = (emu: EmulatorHandle) => emu.stats().requests['POST /machine-data/batch']?.['200'] ?? 0;

describe('console catalog', () => {
  it('GET answers from the copy (one upstream read per minimum age); ?refresh is refused and reads nothing', async () => {
    const { h, emu } = await harness();
    const first = await call(h.url, 'GET', '/console/api/catalog');
    expect(first.status).toBe(200);
    expect(first.body.variables.length).toBeGreaterThan(10);
    expect(first.body.variables.find((v: { id: string }) => v.id === 'mvr_press1_speed')).toMatchObject({ machine: 'Press 1 (OPC UA)' });
    const reads = catalogReads(emu);
    expect(reads).toBeGreaterThanOrEqual(2); // both lists, every page

    for (let i = 0; i < 3; i++) expect((await call(h.url, 'GET', '/console/api/catalog')).status).toBe(200);
    const forced = await call(h.url, 'GET', '/console/api/catalog?refresh=1');
    expect(forced.status).toBe(400);
    expect(forced.body.error).toMatchObject({ code: 'refresh_is_a_post', field: 'refresh' });
    expect(forced.body.error.message).toContain('POST /console/api/catalog/refresh');
    expect(catalogReads(emu)).toBe(reads);
  });

  it('POST /console/api/catalog/refresh is a write: the guard refuses it without JSON or X-Requested-By and from another origin', async () => {
    const { h, emu } = await harness();
    expect((await call(h.url, 'POST', '/console/api/catalog/refresh')).status).toBe(415);
    const cross = await call(h.url, 'POST', '/console/api/catalog/refresh', undefined, { origin: 'http://evil.example', 'x-requested-by': 'x' });
    expect(cross.status).toBe(403);
    expect(catalogReads(emu)).toBe(0);
    // Same origin (or a script) with the header: read from the service.
    const ok = await call(h.url, 'POST', '/console/api/catalog/refresh', undefined, { 'x-requested-by': 'console' });
    expect(ok.status).toBe(200);
    expect(ok.body.variables.length).toBeGreaterThan(10);
    const reads = catalogReads(emu);
    expect(reads).toBeGreaterThan(0);
    // Within CATALOG_REFRESH_MIN_AGE_MS (10 s) of the last read, a refresh answers the copy.
    expect((await call(h.url, 'POST', '/console/api/catalog/refresh', {}, {})).status).toBe(200);
    expect(catalogReads(emu)).toBe(reads);
  });

  it('never goes ahead of sample data in the request budget', async () => {
    // One request per second for everything; sample batches wait for it at every moment (as in
    // test/annotations/outbox.test.ts, where an annotation goes ahead of them).
    const { h, emu } = await harness({
      uplink: { requests_per_minute: 60, batch_size: 1, flush_interval: 0, max_in_flight: 32 },
      generator: [{ name: 'load', variables: { prefix: 'mvr_gen_', count: 20 }, interval: 10 }],
    });
    const budget = h.gw.handle.budget;
    await waitFor(() => h.gw.handle.buffer.available >= 200 && budget.waiting().data >= 1, { what: 'sample batches waiting for the budget' });
    expect(catalogReads(emu)).toBe(0);

    // The console asks for the catalog (empty copy: a read is due) while data waits.
    const pending = call(h.url, 'GET', '/console/api/catalog').catch((err: unknown) => err);
    const before = batches(emu);
    // Eight more budget slots, each of them a chance to overtake the waiting data.
    await waitFor(() => batches(emu) >= before + 8, { timeoutMs: 30_000, what: 'eight more sample batches' });
    expect(catalogReads(emu)).toBe(0);
    expect(budget.waiting().data).toBeGreaterThanOrEqual(1);
    expect(budget.waiting().background).toBe(1); // the catalog's first page, still behind the data
    void pending;
  });
});
