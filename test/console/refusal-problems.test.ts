import { afterEach, describe, expect, it } from 'vitest';
import type { OverviewResponse } from '../../src/console/api/live.js';
import { currentRefusals, REFUSALS_CURRENT_MS, REFUSALS_QUIET_MS, type RefusalRecord } from '../../src/console/refusal-log.js';
import { sparkplugCodec } from '../../src/sources/mqtt/decoders/sparkplug.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { startTestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { connectClient, endClient } from '../sources/mqtt/helpers.js';

/**
 * A refusal is a problem on the Overview while its condition holds: a Sparkplug unknown-alias blip
 * (an edge node whose DBIRTH the gateway missed) stayed listed for 25 minutes, long after the
 * rebirth made every alias known again.
 */
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

const rec = (at: number, reason: string, variable: string | null = null, source = 'line'): RefusalRecord => ({ at, source, variable, reason, detail: null });

describe('refusals as problems', () => {
  it('a kind of refusal is current while it recurs; over a minute after the last one, or once its source delivered 10 s without it, or its variable was read fine since', () => {
    const now = 1_000_000;
    const records = [rec(now - 1_000, 'unknown_alias'), rec(now - 5_000, 'unknown_alias'), rec(now - 2_000, 'not_numeric', 'mvr_a'), rec(now - REFUSALS_CURRENT_MS - 1, 'malformed')];
    expect(currentRefusals(records, now).map((c) => [c.reason, c.count])).toEqual([
      ['unknown_alias', 2],
      ['not_numeric', 1],
    ]);
    // The source went on delivering for 10 s after the last unknown alias: that condition ended.
    const later = now + REFUSALS_QUIET_MS + 1_000;
    expect(currentRefusals(records, later, { lastSampleAt: () => later }).map((c) => c.reason)).toEqual([]);
    // A refusal that comes with every message stays (the source's last sample is as old as it).
    expect(currentRefusals([rec(later - 300, 'unknown_name')], later, { lastSampleAt: () => later - 250 }).map((c) => c.reason)).toEqual(['unknown_name']);
    // Its variable read fine since: over.
    expect(currentRefusals(records, now, { readFineSince: (v, at) => v === 'mvr_a' && at < now }).map((c) => c.reason)).toEqual(['unknown_alias']);
  });

  it('the Overview lists an unknown-alias blip, and no longer once the rebirth made the edge node readable again', async () => {
    const port = await freePort();
    const brokerPort = await freePort();
    const closed = await freePort();
    const gw = await startTestGateway(
      { baseUrl: `http://127.0.0.1:${closed}/tracking/v1`, authUrl: `http://127.0.0.1:${closed}` },
      {
        http: { enabled: true, port },
        mqtt: {
          broker: { enabled: true, host: '127.0.0.1', port: brokerPort, allow_anonymous: true },
          connections: [{ name: 'line', url: 'embedded', subscriptions: [{ format: 'sparkplug', topic: 'spBv1.0/plant/#', metrics: [{ name: 'Temperature', variable: 'mvr_oven_temperature' }] }] }],
        },
      },
    );
    cleanup.push(() => gw.destroy());
    await waitFor(() => gw.handle.status().sources.every((s) => s.state === 'connected'), { what: 'broker and connection up', timeoutMs: 30_000 });
    const node = await connectClient(`mqtt://127.0.0.1:${brokerPort}`, { clientId: 'oven-ctl' });
    cleanup.push(() => endClient(node));
    const payload = (p: Parameters<typeof sparkplugCodec.encodePayload>[0]) => Buffer.from(sparkplugCodec.encodePayload(p));
    let seq = 0;
    const birth = async () => {
      seq = 0;
      await node.publishAsync('spBv1.0/plant/NBIRTH/oven-ctl', payload({ timestamp: Date.now(), seq: seq++, metrics: [{ name: 'bdSeq', type: 'UInt64', value: 1 }] }), { qos: 0 });
      await node.publishAsync('spBv1.0/plant/DBIRTH/oven-ctl/oven1', payload({ timestamp: Date.now(), seq: seq++, metrics: [{ name: 'Temperature', alias: 7, type: 'Double', value: 180 }] }), { qos: 0 });
    };
    // The gateway sees data before any BIRTH: alias 7 is unknown, the blip.
    await node.publishAsync('spBv1.0/plant/DDATA/oven-ctl/oven1', payload({ timestamp: Date.now(), seq: 5, metrics: [{ alias: 7, type: 'Double', value: 181 }] }), { qos: 0 });
    const overview = async () => (await (await fetch(`http://127.0.0.1:${port}/console/api/overview`)).json()) as OverviewResponse;
    const first = await waitFor(async () => (await overview()).refusing.find((c) => c.reason === 'unknown_alias') ?? null, { what: 'the unknown alias listed' });
    expect(first).toMatchObject({ source: 'line', count: 1 });
    // The edge node is reborn and its data flows again, every alias known.
    await birth();
    const publishing = setInterval(() => void node.publishAsync('spBv1.0/plant/DDATA/oven-ctl/oven1', payload({ timestamp: Date.now(), seq: seq++ % 256, metrics: [{ alias: 7, type: 'Double', value: 182 }] }), { qos: 0 }).catch(() => undefined), 300);
    cleanup.push(async () => clearInterval(publishing));
    await waitFor(async () => ((await overview()).refusing.some((c) => c.reason === 'unknown_alias') ? null : true), { what: 'the blip no longer listed', timeoutMs: REFUSALS_QUIET_MS + 20_000 });
    // Still in the history of refusals; just not a problem any more.
    expect((await overview()).refusals.some((r) => r.reason === 'unknown_alias')).toBe(true);
  }, 90_000);
});
