import { afterEach, describe, expect, it } from 'vitest';
import { startModbusSimulator, type ModbusSimulator } from '../../../src/sim/modbus-device.js';
import type { QualitySummary } from '../../../src/core/quality.js';
import { deviceStatus, memorySink, metricValue, startModbus, waitFor, type StartedModbus } from './helpers.js';

/**
 * Quality per variable from a real Modbus TCP server (modbus-serial's ServerTCP): an exception
 * response makes the values of that read bad (Modbus Application Protocol §7), a value read again is
 * good, a poll that stops makes values stale after three periods, and a server that goes away makes
 * its device's variables stale at once, the device row saying "disconnected", down since the
 * connection closed.
 */
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

async function sim(): Promise<ModbusSimulator> {
  const s = await startModbusSimulator({ port: 0, demo: false });
  cleanups.push(() => s.close());
  return s;
}

async function modbus(raw: unknown): Promise<StartedModbus & { samples: Array<{ variable: string; value: number }> }> {
  const { sink, samples } = memorySink();
  const m = await startModbus(raw, sink);
  cleanups.push(() => m.close());
  return { ...m, samples };
}

const quality = (m: StartedModbus, id: string) => {
  const t = m.ctx.stats.quality;
  t.age(Date.now());
  return t.reading(t.slotOf(id));
};

describe('Modbus quality per variable', () => {
  it('an exception makes the values of that read bad; the others stay good; answered again, good', async () => {
    const s = await sim();
    s.setRegister('holding', 0, 7);
    s.setRegister('holding', 200, 9);
    const m = await modbus({
      devices: [{ name: 'mixer1', host: '127.0.0.1', port: s.port, poll_interval: 100, timeout: 300, registers: [{ variable: 'mvr_speed', table: 'holding', address: 0 }, { variable: 'mvr_temp', table: 'holding', address: 200 }] }],
    });
    await waitFor(() => quality(m, 'mvr_speed').quality === 'good' && quality(m, 'mvr_temp').quality === 'good', 'both good');
    // 04 Server Device Failure for the second read only (the two addresses are read by separate requests).
    s.injectException(200, 200, 4, 'holding');
    await waitFor(() => quality(m, 'mvr_temp').quality === 'bad', 'temperature bad after the exception');
    expect(quality(m, 'mvr_speed').quality).toBe('good');
    expect(deviceStatus(m.source, 'mixer1').variables).toMatchObject({ total: 2, good: 1, bad: 1 } satisfies Partial<QualitySummary>);
    expect(m.source.status().variables).toMatchObject({ total: 2, good: 1, bad: 1 });
    expect(await metricValue(m.metrics, 'gateway_source_variables', { source: 'modbus', quality: 'bad' })).toBe(1);
    s.clearFaults();
    await waitFor(() => quality(m, 'mvr_temp').quality === 'good', 'temperature good again');
  });

  it('a server that goes away: the device is disconnected, stale from the connection\'s close', async () => {
    const s = await sim();
    const m = await modbus({
      reconnect: { initial_delay: 200, max_delay: 500 },
      devices: [{ name: 'mixer1', host: '127.0.0.1', port: s.port, poll_interval: 200, timeout: 300, retries: 0, registers: [{ variable: 'mvr_speed', table: 'holding', address: 0 }] }],
    });
    await waitFor(() => quality(m, 'mvr_speed').quality === 'good', 'good');
    const closedAt = Date.now();
    await s.close();
    await waitFor(() => deviceStatus(m.source, 'mixer1').state === 'disconnected', 'device row says disconnected', 5_000);
    const d = deviceStatus(m.source, 'mixer1');
    expect(typeof d.down_since).toBe('number');
    expect(d.down_since as number).toBeGreaterThanOrEqual(closedAt - 50);
    expect((d.down_since as number) - closedAt).toBeLessThan(2_000);
    expect(quality(m, 'mvr_speed')).toEqual({ quality: 'stale', since: m.source.status().downSince ?? d.down_since });
    expect(m.source.status().variables).toMatchObject({ total: 1, stale: 1 });
    // Never "connecting" again while it is down: that word is for a device never reached yet.
    for (let i = 0; i < 10; i++) {
      expect(deviceStatus(m.source, 'mixer1').state).not.toBe('connecting');
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  it('a value the device no longer answers for goes stale by age (three poll periods, at least 2 s)', async () => {
    const s = await sim();
    const m = await modbus({
      devices: [
        { name: 'mixer1', host: '127.0.0.1', port: s.port, poll_interval: 200, timeout: 200, retries: 0, registers: [{ variable: 'mvr_speed', table: 'holding', address: 0 }, { variable: 'mvr_temp', table: 'holding', address: 200 }] },
      ],
    });
    await waitFor(() => quality(m, 'mvr_temp').quality === 'good', 'good');
    // The read of address 200 gets no answer; the device still answers the other one, so it stays up.
    s.injectSilence(200, 200, 'holding');
    const silentFrom = Date.now();
    await waitFor(() => quality(m, 'mvr_temp').quality === 'stale', 'temperature stale by age', 10_000);
    expect(Date.now() - silentFrom).toBeGreaterThanOrEqual(1_500);
    expect(quality(m, 'mvr_speed').quality).toBe('good');
    expect(['connected', 'degraded']).toContain(deviceStatus(m.source, 'mixer1').state);
  });
});
