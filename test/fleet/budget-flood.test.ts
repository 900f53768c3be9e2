import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { mosquittoAvailable, startMosquitto, type Mosquitto } from '../sources/mqtt/helpers.js';
import { publishRetainedFromAnotherProcess } from './rogue-publisher.js';

/**
 * Issue 21 §5, fake peers on the plant broker: anyone who may publish under the fleet prefix can
 * announce demand under made-up names. A gateway counts at most uplink.budget_sharing.max_gateways
 * of its group (itself included), never paces below its floor (the address budget divided by
 * max_gateways), and recomputes its share at most once a second whatever the announcement rate,
 * so 15,000 fake peers neither starve it nor stall its event loop (before: 5/min and 25 s).
 * The broker is a real mosquitto; the fakes come from another process.
 */
const PREFIX = 'plant/fleet';
const BUDGET = 1_400;
const MAX_GATEWAYS = 32;
const run = mosquittoAvailable() ? describe : describe.skip;

let broker: Mosquitto;
let emu: EmulatorHandle;
let gw: TestGateway;

run('budget sharing under fake peers (mosquitto)', () => {
  beforeAll(async () => {
    broker = await startMosquitto();
    emu = await startEmulator({ port: 0 });
    gw = await startTestGateway(emu, {
      gateway: { name: 'line-1' },
      uplink: { requests_per_minute: BUDGET, batch_size: 5, flush_interval: 0, max_in_flight: 2, backfill: { enabled: false }, budget_sharing: { mode: 'fleet', group: 'nat', announce_interval: 500, lease: '5s' } },
      fleet: { mqtt: { url: broker.url, prefix: PREFIX, interval: '1s', keepalive: '5s' } },
    });
    // A backlog, so this gateway wants the whole budget (its demand is the total when saturated).
    await gw.handle.buffer.append(Array.from({ length: 20_000 }, (_, i) => ({ variable: `mvr_gen_${(i % 20) + 1}`, ts: Date.UTC(2026, 0, 1) + i * 10, value: i })));
    await waitFor(() => gw.handle.status().fleet?.broker.connected && gw.handle.budget.ratePerMinute > BUDGET * 0.9, { timeoutMs: 30_000, what: 'line-1 alone with the whole budget' });
  }, 90_000);

  afterAll(async () => {
    await gw?.destroy();
    await emu?.close();
    await broker?.stop();
  });

  it('300 fake peers leave this gateway at least its floor (budget / max_gateways)', async () => {
    await publishRetainedFromAnotherProcess(broker.url, { kind: 'fake-peers', prefix: PREFIX, namePrefix: 'fake-', group: 'nat', count: 300, demand: BUDGET, leaseMs: 600_000 });
    // The fakes arrive: the share drops from the whole budget...
    await waitFor(() => gw.handle.budget.ratePerMinute < BUDGET / 2, { timeoutMs: 20_000, what: 'the share reacting to the fake peers' });
    // ... and stays at the floor or above once every announcement is in.
    const sharing = await waitFor(() => {
      const s = gw.handle.status().fleet!.budget_sharing!;
      return s.ignored_peers === 300 - (MAX_GATEWAYS - 1) ? s : null;
    }, { timeoutMs: 20_000, what: 'every fake announcement counted or ignored' });
    expect(gw.handle.budget.ratePerMinute).toBeGreaterThanOrEqual((BUDGET / MAX_GATEWAYS) * 0.99);
    expect(sharing.members).toHaveLength(MAX_GATEWAYS);
    expect(sharing).toMatchObject({ max_gateways: MAX_GATEWAYS, ignored_peers: 300 - (MAX_GATEWAYS - 1), floor_per_minute: BUDGET / MAX_GATEWAYS });
    expect(sharing.members[0].name).toBe('line-1');
  }, 60_000);

  it('15,000 fake peers do not stall the gateway (recomputed at most once a second)', async () => {
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const t0 = performance.now();
    await publishRetainedFromAnotherProcess(broker.url, { kind: 'fake-peers', prefix: PREFIX, namePrefix: 'flood-', group: 'nat', count: 15_000, demand: BUDGET, leaseMs: 600_000 });
    await waitFor(
      () => {
        const s = gw.handle.status().fleet?.budget_sharing;
        return s && s.members.length + (s.ignored_peers ?? 0) >= 15_300;
      },
      { timeoutMs: 150_000, what: 'the 15,000 fake peers seen' },
    );
    lag.disable();
    const stallMs = lag.max / 1e6;
    // Before: every announcement re-sorted the whole table, 25 s of blocked event loop here.
    expect(stallMs, `longest event-loop stall while 15,000 announcements arrived (${Math.round(performance.now() - t0)} ms in all)`).toBeLessThan(2_000);
    expect(gw.handle.budget.ratePerMinute).toBeGreaterThanOrEqual((BUDGET / MAX_GATEWAYS) * 0.99);
    expect(gw.handle.status().fleet!.budget_sharing!.members).toHaveLength(MAX_GATEWAYS);
    // The status stays small: the counted members only.
    expect(JSON.stringify(gw.handle.status()).length).toBeLessThan(200_000);
  }, 240_000);
});
