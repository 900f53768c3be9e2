import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator } from '../../../src/emulator/index.js';
import { OPCUA_DEMO_MAPPING, startOpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { startTestGateway } from '../../helpers/gateway.js';
import { delay, waitFor } from '../../helpers/wait.js';
import { tmpPki } from './helpers.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

describe('end to end: OPC UA simulator → gateway (source, SQLite buffer, uplink) → emulator', () => {
  it('delivers the press values with their source timestamps, across a server restart', async () => {
    const simPki = tmpPki('opcua-e2e-sim-');
    let sim = await startOpcuaSimulator({ pkiDir: simPki, updateIntervalMs: 200 });
    cleanup.push(() => sim.close());
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const gw = await startTestGateway(emu, {
      opcua: {
        servers: [
          {
            name: 'press1',
            endpoint: sim.endpointUrl,
            publishing_interval: 200,
            reconnect: { initial_delay: 300, max_delay: 2_000 },
            nodes: OPCUA_DEMO_MAPPING.map((m) => ({ node_id: sim.nsuNodeIds[m.name], variable: m.variable })),
          },
        ],
      },
    });
    cleanup.push(() => gw.destroy());

    for (const m of OPCUA_DEMO_MAPPING) await waitFor(() => emu.values(m.variable).length > 0, { timeoutMs: 30_000, what: `${m.variable} stored by the service` });

    // A value with a known source timestamp arrives upstream under exactly that timestamp.
    const at = new Date(Date.now() - 120_000);
    at.setMilliseconds(123);
    sim.pauseUpdates();
    sim.setValue('pressure', 222.5, { sourceTimestamp: at });
    const stored = await waitFor(() => emu.values('mvr_press1_pressure').find((v) => v.timestamp === at.toISOString()), { timeoutMs: 30_000, what: 'pressure with its source timestamp' });
    expect(stored.value).toBe(222.5);

    // The PLC restarts on the same port; values keep arriving with no operator action.
    const port = sim.port;
    await sim.close();
    await delay(1_000);
    sim = await startOpcuaSimulator({ port, pkiDir: simPki, updateIntervalMs: 200 });
    const restartedAt = Date.now();
    await waitFor(() => emu.values('mvr_press1_temperature').filter((v) => Date.parse(v.timestamp) > restartedAt).length >= 3, { timeoutMs: 45_000, what: 'temperature after the restart' });

    const status = gw.handle.status() as unknown as { sources: Array<{ name: string; state: string; samplesRead: number }> };
    const press = status.sources.find((s) => s.name === 'press1');
    expect(press?.state).toBe('connected');
    expect(press?.samplesRead).toBeGreaterThan(10);
  });
});
