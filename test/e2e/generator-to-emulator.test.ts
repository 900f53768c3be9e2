import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

const VARIABLES = Array.from({ length: 20 }, (_, i) => `mvr_gen_${i + 1}`);

async function storedCounts(emu: EmulatorHandle): Promise<{ total: number; overwritten: number; perVar: Record<string, number> }> {
  const perVar = emu.valueCounts();
  const total = VARIABLES.reduce((n, v) => n + (perVar[v] ?? 0), 0);
  return { total, overwritten: emu.stats().values_overwritten, perVar };
}

async function runScenario(faults: (emu: EmulatorHandle, gw: TestGateway) => Promise<void>) {
  const emu = await startEmulator({ port: 0 });
  cleanup.push(() => emu.close());
  const gw = await startTestGateway(emu, {
    generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: 20 }, interval: 20 }],
    uplink: { flush_interval: 50, requests_per_minute: 6_000 },
  });
  cleanup.push(() => gw.destroy());
  await faults(emu, gw);
  // Stop producing, then wait until everything committed has been delivered.
  const gen = gw.handle.sources[0];
  await gen.close();
  await gw.handle.buffer.flush();
  const committed = gw.handle.buffer.stats().committedTotal;
  expect(committed).toBeGreaterThan(1_000);
  emu.clearFaults();
  await waitFor(() => gw.handle.buffer.stats().rows === 0, { timeoutMs: 60_000, what: 'buffer drained' });
  const stored = await storedCounts(emu);
  return { emu, gw, committed, stored };
  // The generator writes strictly increasing timestamps, so every committed sample is a distinct
  // (variable, timestamp) key: stored == committed means none lost and none stored twice.
}

describe('end to end: generator → buffer → emulator', () => {
  it('stores every generated sample exactly once', async () => {
    const { committed, stored, gw } = await runScenario(async (_emu, g) => {
      await waitFor(() => g.handle.buffer.stats().committedTotal >= 2_000, { what: '2,000 samples generated (about 2 s)' });
    });
    expect(stored.total).toBe(committed);
    // Each variable got the same number of distinct timestamps (one per tick).
    expect(new Set(Object.values(stored.perVar)).size).toBe(1);
    expect(gw.handle.sync.stats().deliveredTotal).toBe(committed);
  });

  it('stores every sample exactly once with 20 % injected 500s and a 10 s outage in the middle', async () => {
    const { committed, stored, emu } = await runScenario(async (emu, g) => {
      const committedNow = () => g.handle.buffer.stats().committedTotal;
      const batches = (status: string) => emu.stats().requests['POST /machine-data/batch']?.[status] ?? 0;
      emu.setFaults({ error_rate: 0.2, status: 500 });
      // On a loaded machine the first seconds can go to the token exchange and its backoff; the
      // outage starts only once batches have really met injected 500s (and about 3 s were generated).
      await waitFor(() => batches('500') > 0 && committedNow() >= 3_000, { timeoutMs: 30_000, what: 'a batch answered 500, 3,000 samples generated' });
      emu.setFaults({ outage_seconds: 10 });
      // The outage is met (connections dropped) and over (a batch accepted again).
      await waitFor(() => batches('dropped') > 0, { what: 'a batch dropped by the outage' });
      const accepted = emu.stats().batches_accepted;
      await waitFor(() => emu.stats().batches_accepted > accepted, { timeoutMs: 40_000, what: 'a batch accepted after the outage' });
      // And about 3 s more generated after it.
      const after = committedNow();
      await waitFor(() => committedNow() >= after + 3_000, { what: '3,000 samples generated after the outage' });
    });
    expect(stored.total).toBe(committed);
    const requests = emu.stats().requests['POST /machine-data/batch'] ?? {};
    expect(requests['500'] ?? 0).toBeGreaterThan(0);
    expect(requests['dropped'] ?? 0).toBeGreaterThan(0);
  }, 120_000);
});
