import { afterAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { freePort } from '../sources/mqtt/helpers.js';

/**
 * Budget sharing without its broker: a gateway that cannot reach the plant broker starts small
 * (an eighth of the address budget), acts alone after 10 s, and then only the 429s tell it that
 * the address is busier than it thinks: the rate finder paces it under its share, in fleet mode as
 * in every other (rate-finder.ts); the share itself stays.
 */
let emu: EmulatorHandle | undefined;
let gw: TestGateway | undefined;

afterAll(async () => {
  await gw?.destroy();
  await emu?.close();
});

describe('budget sharing with the plant broker unreachable', () => {
  it('starts at an eighth, acts alone after 10 s, and finds the address\'s real rate under its share on 429s', async () => {
    // The emulator allows 120/min; this gateway believes the address has 600/min.
    emu = await startEmulator({ port: 0, rateLimitPerMinute: 120 });
    const deadPort = await freePort();
    gw = await startTestGateway(emu, {
      uplink: { requests_per_minute: 600, batch_size: 5, flush_interval: 0, max_in_flight: 2, backfill: { enabled: false }, budget_sharing: { mode: 'fleet', announce_interval: 500 } },
      fleet: { mqtt: { url: `mqtt://127.0.0.1:${deadPort}` } },
    });
    const handle = gw.handle;
    expect(handle.budget.ratePerMinute).toBe(75);
    expect(handle.status().fleet?.broker.connected).toBe(false);
    await handle.buffer.append(Array.from({ length: 20_000 }, (_, i) => ({ variable: `mvr_gen_${(i % 20) + 1}`, ts: Date.UTC(2026, 0, 1) + i * 10, value: i })));
    await waitFor(() => handle.budget.ratePerMinute >= 590, { timeoutMs: 20_000, what: 'the whole budget after 10 s alone' });
    // 10/s against a limit of 2/s: the window fills, 429s come, the rate is found under the share.
    const st = await waitFor(
      () => {
        const s = handle.status();
        return s.uplink.rate.found_per_minute !== null ? s : null;
      },
      { timeoutMs: 40_000, what: 'a rate found from 429s' },
    );
    expect(st.uplink.rate.found_per_minute).toBeLessThanOrEqual(120);
    expect(handle.budget.ratePerMinute).toBeLessThanOrEqual(120);
    // The fleet's share keeps working on top: the whole address budget, the pace under it.
    expect(st.fleet?.budget_sharing?.share_per_minute).toBeGreaterThanOrEqual(590);
    expect(st.fleet?.budget_sharing?.pace_per_minute).toBeLessThanOrEqual(120);
    expect(st.uplink.state.state).toBe('rate_limited');
    expect(emu.stats().rate_limited).toBeGreaterThan(0);
  }, 90_000);
});
