import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator } from '../../../src/emulator/index.js';
import { demoMqttConnection, startMqttSimulator, OVEN_METRICS, PACKER_FIELDS } from '../../../src/sim/mqtt-publisher.js';
import type { EmbeddedBrokerSource } from '../../../src/sources/mqtt/broker-source.js';
import { startTestGateway } from '../../helpers/gateway.js';
import { startAedes, waitFor } from './helpers.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

const VARIABLES = [...PACKER_FIELDS.map((f) => f.variable), ...OVEN_METRICS.map((m) => m.variable)];

describe('end to end: MQTT → buffer → tracking-service emulator', () => {
  it('delivers the simulated packer (JSON) and oven (Sparkplug B) through the embedded broker', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const gw = await startTestGateway(emu, {
      mqtt: {
        broker: { enabled: true, host: '127.0.0.1', port: 0, username: 'plc', password: 'plc-secret' },
        connections: [demoMqttConnection({ name: 'plant-mqtt', url: 'embedded' })],
      },
    });
    cleanup.push(() => gw.destroy());
    const broker = gw.handle.sources.find((s) => s.name === 'mqtt-broker') as EmbeddedBrokerSource;
    await waitFor(() => broker.broker.address, { what: 'embedded broker listening' });
    const sim = await startMqttSimulator({ url: `mqtt://127.0.0.1:${broker.broker.address!.port}`, username: 'plc', password: 'plc-secret', intervalMs: 100 });
    cleanup.push(() => sim.close());

    await waitFor(() => VARIABLES.every((v) => (emu.valueCounts()[v] ?? 0) >= 5), { timeoutMs: 60_000, what: 'every packer and oven variable stored by the service' });
    const packerRate = emu.values('mvr_packer1_rate');
    expect(packerRate.length).toBeGreaterThanOrEqual(5);
    const ovenTemps = emu.values('mvr_oven1_temperature');
    expect(ovenTemps.every((v) => Number(v.value) > 170 && Number(v.value) < 190)).toBe(true);
    const status = gw.handle.status() as { sources: Array<{ name: string; state: string; samplesRefused: Record<string, number> }> };
    expect(status.sources.find((s) => s.name === 'plant-mqtt')).toMatchObject({ state: 'connected', samplesRefused: {} });
  });

  it('delivers from a remote broker with payload timestamps kept exactly', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const broker = await startAedes();
    cleanup.push(() => broker.close());
    const sim = await startMqttSimulator({ url: broker.url, intervalMs: 100, sparkplug: false });
    cleanup.push(() => sim.close());
    const gw = await startTestGateway(emu, { mqtt: { connections: [demoMqttConnection({ url: broker.url, clientId: 'gw-e2e-remote' })] } });
    cleanup.push(() => gw.destroy());
    await waitFor(() => (emu.valueCounts().mvr_packer1_rejects ?? 0) >= 10, { timeoutMs: 60_000, what: 'packer values stored' });
    const values = emu.values('mvr_packer1_rate');
    // The service received the publisher's own timestamps (whole milliseconds, strictly increasing).
    const ts = values.map((v) => Date.parse(String(v.timestamp)));
    expect(ts.every((t) => Number.isInteger(t))).toBe(true);
    expect([...ts].sort((a, b) => a - b)).toEqual(ts);
  });
});
