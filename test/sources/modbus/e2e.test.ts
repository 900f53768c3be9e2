import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator } from '../../../src/emulator/index.js';
import { MODBUS_DEMO_MAP, startModbusSimulator } from '../../../src/sim/modbus-device.js';
import { startTestGateway } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

describe('end to end: Modbus simulator → modbus source → buffer → emulator', () => {
  it('delivers the demo mixer variables with the decoded values', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const sim = await startModbusSimulator({ port: 0, demo: false });
    cleanup.push(() => sim.close());
    // Known values in the demo map's registers (float32 ABCD, uint16, float32 CDAB, uint32 × 0.1, int16 × 0.1, coil).
    sim.setValue('holding', 0, 72.5, 'float32', 'ABCD');
    sim.setValue('holding', 2, 1234, 'uint16');
    sim.setValue('holding', 3, 15.25, 'float32', 'CDAB');
    sim.setValue('holding', 5, 123456, 'uint32', 'ABCD');
    sim.setValue('input', 0, -25, 'int16');
    sim.setBits('coil', 0, [true]);
    const expected: Record<string, number> = {
      mvr_mixer1_temperature: 72.5,
      mvr_mixer1_speed: 1234,
      mvr_mixer1_power: 15.25,
      mvr_mixer1_energy: 12345.6,
      mvr_mixer1_level: -2.5,
      mvr_mixer1_running: 1,
    };
    const registers = MODBUS_DEMO_MAP.map(({ unit: _unit, ...r }) => r);
    const gw = await startTestGateway(emu, {
      modbus: { devices: [{ name: 'mixer1', host: '127.0.0.1', port: sim.port, poll_interval: 200, registers }] },
      uplink: { flush_interval: 100 },
    });
    cleanup.push(() => gw.destroy());

    for (const [variable, value] of Object.entries(expected)) {
      const stored = await waitFor(() => (emu.values(variable).length > 0 ? emu.values(variable) : null), { what: `${variable} stored at the emulator` });
      expect([variable, stored[0].value]).toEqual([variable, value]);
      expect(Date.parse(stored[0].timestamp)).toBeGreaterThan(Date.now() - 60_000);
    }
    // A change on the device reaches the service.
    sim.setValue('holding', 2, 999, 'uint16');
    await waitFor(() => emu.values('mvr_mixer1_speed').some((v) => v.value === 999), { what: 'changed speed stored' });
    const source = gw.handle.sources.find((s) => s.kind === 'modbus')!;
    expect(source.status().state).toBe('connected');
    expect(source.status().samplesRead).toBeGreaterThan(6);
  });
});
