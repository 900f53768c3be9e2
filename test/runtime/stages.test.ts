import { afterEach, describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startTestGateway, testConfigInput } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The composition root in stages (src/runtime/gateway.ts, issue 23): what a stop and a scrape see
 * through the running gateway.
 */

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function emulator(): Promise<EmulatorHandle> {
  const emu = await startEmulator({ port: 0 });
  cleanup.push(() => emu.close());
  return emu;
}

const T0 = Date.parse('2026-11-22T06:00:00.000Z');

describe('gateway stages', () => {
  it('stops every source, also the ones a reload under way brings', async () => {
    const emu = await emulator();
    const gen = { generator: [{ name: 'gen', variables: ['mvr_gen_1'], interval: 50 }] };
    const gw = await startTestGateway(emu, gen);
    cleanup.push(() => gw.destroy());
    // A new OPC UA section: building it first loads node-opcua, which takes a while, so the stop
    // arrives while the reload is under way (past its "stopping?" check, before its sources run).
    const { config: next } = validateConfig(
      testConfigInput(emu, gw.dir, {
        ...gen,
        opcua: { servers: [{ name: 'plc', endpoint: 'opc.tcp://127.0.0.1:9/', reconnect: { initial_delay: 200, max_delay: 1_000 }, nodes: [{ node_id: 'ns=1;s=Temp', variable: 'mvr_plc_1' }] }] },
      }),
    );
    const reload = gw.handle.reload(next);
    await new Promise((r) => setImmediate(r));
    await gw.handle.close();
    // The reload finished before the stop went on, so its source was stopped with the others.
    expect((await reload).restartedSources).toEqual(['plc']);
    expect(gw.handle.sources.map((s) => `${s.name}:${s.status().state}`).sort()).toEqual(['gen:stopped', 'plc:stopped']);
    await expect(gw.handle.reload(next)).rejects.toThrow(/stopping/);
  });

  it('gateway_backlog_eta_seconds says what /status says: no estimate for a few samples with nothing measured (issue 24 §1)', async () => {
    const emu = await emulator();
    const gw = await startTestGateway(emu);
    cleanup.push(() => gw.destroy());
    // A trickle delivered, then an outage with 14 samples waiting: the old estimate divided them by
    // the trickle's rate (14 samples → 82 min); there is no basis for an estimate.
    await gw.handle.buffer.append([{ variable: 'mvr_gen_1', ts: T0, value: 1 }]);
    await waitFor(() => gw.handle.sync.stats().deliveredTotal >= 1, { what: 'the first sample delivered' });
    emu.setFaults({ outage_seconds: 600 });
    await gw.handle.buffer.append(Array.from({ length: 14 }, (_, i) => ({ variable: 'mvr_gen_1', ts: T0 + 1 + i, value: i })));
    await waitFor(() => gw.handle.buffer.stats().rows === 14, { what: '14 samples waiting' });
    expect(gw.handle.sync.stats().ratePerSecond).toBeGreaterThan(0);
    expect(gw.handle.status().backlog_eta_s).toBeNull();
    expect(await gw.handle.metrics.registry.metrics()).toMatch(/^gateway_backlog_eta_seconds -1$/m);
  });

  it('reads the gauges that follow the status when they are scraped, without status()', async () => {
    const emu = await emulator();
    const gw = await startTestGateway(emu);
    cleanup.push(() => gw.destroy());
    // The emulator has no mvr_new_1: its samples are refused and set aside.
    await gw.handle.buffer.append([...Array.from({ length: 5 }, (_, i) => ({ variable: 'mvr_new_1', ts: T0 + i, value: i })), { variable: 'mvr_gen_1', ts: T0, value: 1 }]);
    await waitFor(() => gw.handle.sync.stats().setAsideTotal === 5 && gw.handle.buffer.stats().rows === 0, { what: 'samples set aside' });
    const scraped = await gw.handle.metrics.registry.metrics();
    expect(scraped).toMatch(/^gateway_set_aside_samples 5$/m);
    expect(scraped).toMatch(/^gateway_backlog_eta_seconds -1$/m);
    expect(scraped).toMatch(/^gateway_gaps_open 0$/m);
    expect(gw.handle.status().set_aside.samples).toBe(5);
    // After the stop the gauges keep their last value instead of reading a closed buffer.
    await gw.close();
    expect(await gw.handle.metrics.registry.metrics()).toMatch(/^gateway_set_aside_samples 5$/m);
  });
});
