import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openTestBuffer, type TestBuffer } from '../../helpers/buffer.js';
import { KNOWN_COILS, KNOWN_DISCRETE_INPUTS, knownValues, SPECIAL_ADDRESSES, startModbusSimulator, type ModbusSimulator } from '../../../src/sim/modbus-device.js';
import { deviceStatus, memorySink, metricValue, startModbus, waitFor, type StartedModbus } from './helpers.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

async function sim(options: Parameters<typeof startModbusSimulator>[0] = {}): Promise<ModbusSimulator> {
  const s = await startModbusSimulator({ port: 0, demo: false, ...options });
  cleanups.push(() => s.close());
  return s;
}
async function modbus(raw: unknown, sink: Parameters<typeof startModbus>[1]): Promise<StartedModbus> {
  const m = await startModbus(raw, sink);
  cleanups.push(() => m.close());
  return m;
}
function buffer(): TestBuffer {
  const b = openTestBuffer();
  cleanups.push(() => b.destroy());
  return b;
}
const device = (name: string, port: number, registers: unknown[], extra: Record<string, unknown> = {}) => ({ name, host: '127.0.0.1', port, poll_interval: 100, timeout: 300, registers, ...extra });
const latest = (rows: Array<{ variable: string; value: number }>) => new Map(rows.map((r) => [r.variable, r.value]));
const logged = (m: StartedModbus, pattern: RegExp) => m.lines.some((l) => pattern.test(String(l.msg)));

describe('modbus source over TCP against the simulator', () => {
  it('decodes every type and byte order, coils and discrete inputs, into the buffer with the response time', async () => {
    const s = await sim();
    const b = buffer();
    const registers = [
      ...knownValues('holding').map((k) => ({ variable: `mvr_h_${k.key}`, table: 'holding', address: k.address, type: k.type, byte_order: k.order, ...(k.bit !== undefined ? { bit: k.bit } : {}) })),
      ...knownValues('input').map((k) => ({ variable: `mvr_i_${k.key}`, table: 'input', address: k.address, type: k.type, byte_order: k.order, ...(k.bit !== undefined ? { bit: k.bit } : {}) })),
      ...KNOWN_COILS.map((_, i) => ({ variable: `mvr_coil_${i}`, table: 'coil', address: 1000 + i })),
      ...KNOWN_DISCRETE_INPUTS.map((_, i) => ({ variable: `mvr_di_${i}`, address: `1${String(1001 + i).padStart(4, '0')}` })),
    ];
    const scaled = [{ variable: 'mvr_scaled', table: 'holding', address: 1004, type: 'uint16', scale: 0.01, offset: -500 }];
    const before = Date.now();
    const m = await modbus({ devices: [device('known', s.port, registers), device('scaled', s.port, scaled)] }, b.buffer);
    const expectedCount = registers.length + 1;
    await waitFor(() => latest(b.rows()).size === expectedCount, `all ${expectedCount} variables in the buffer`);
    const after = Date.now();
    const values = latest(b.rows());
    for (const table of ['holding', 'input'] as const) {
      for (const k of knownValues(table)) expect([`${table} ${k.key}`, values.get(`mvr_${table[0]}_${k.key}`)]).toEqual([`${table} ${k.key}`, k.expected]);
    }
    KNOWN_COILS.forEach((bit, i) => expect(values.get(`mvr_coil_${i}`)).toBe(bit));
    KNOWN_DISCRETE_INPUTS.forEach((bit, i) => expect(values.get(`mvr_di_${i}`)).toBe(bit));
    expect(values.get('mvr_scaled')).toBe(43.21); // 54321 × 0.01 − 500, without binary noise
    const first = b.rows()[0];
    expect(first.ts).toBeGreaterThanOrEqual(before);
    expect(first.ts).toBeLessThanOrEqual(after);
    await waitFor(() => m.source.status().state === 'connected', 'source connected');
  });

  it('a full buffer under refuse_new: polled values are counted as refused (buffer_full), not as read, and reading resumes once there is room', async () => {
    const s = await sim();
    const b = openTestBuffer({ whenFull: 'refuse_new', maxBytes: 1_000_000 });
    cleanups.push(() => b.destroy());
    for (let i = 0; b.buffer.usedBytes() <= 1_000_000; i++) await b.buffer.append(Array.from({ length: 10_000 }, (_, k) => ({ variable: 'mvr_fill', ts: 1_700_000_000_000 + i * 10_000 + k, value: k })));
    const k = knownValues('holding')[0];
    const m = await modbus({ devices: [device('full', s.port, [{ variable: 'mvr_full_h', table: 'holding', address: k.address, type: k.type, byte_order: k.order }])] }, b.buffer);
    const lost = () => metricValue(b.metrics, 'gateway_buffer_dropped_samples_total', { policy: 'refuse_new' });
    await waitFor(async () => (await lost()) >= 3, 'three polls refused by the buffer');
    // Issue 21 §1: before, refused values were counted as read (the append resolved) and nothing showed at the source.
    const status = m.source.status();
    expect(status.samplesRead).toBe(0);
    expect(status.samplesRefused.buffer_full).toBeGreaterThanOrEqual(3);
    expect(status.lastError?.message).toMatch(/^refused: buffer full \(buffer\.when_full = refuse_new\)/);
    expect(logged(m, /modbus samples not buffered/)).toBe(true);
    expect(b.rows().filter((r) => r.variable === 'mvr_full_h')).toHaveLength(0);
    // The service takes the backlog: the next polls are committed and counted as read.
    b.buffer.ack(b.buffer.claimNewest(1_000_000));
    await waitFor(() => b.rows().some((r) => r.variable === 'mvr_full_h'), 'a poll committed once there is room');
    await waitFor(() => m.source.status().samplesRead > 0, 'counted as read');
  });

  it('refuses NaN and infinity as not_finite and rounds 64-bit values beyond 2^53 with one warning', async () => {
    const s = await sim();
    const { sink, samples } = memorySink();
    const m = await modbus(
      {
        devices: [
          device('special', s.port, [
            { variable: 'mvr_nan32', table: 'holding', address: SPECIAL_ADDRESSES.float32NaN, type: 'float32' },
            { variable: 'mvr_inf32', table: 'holding', address: SPECIAL_ADDRESSES.float32Infinity, type: 'float32' },
            { variable: 'mvr_nan64', table: 'holding', address: SPECIAL_ADDRESSES.float64NaN, type: 'float64' },
            { variable: 'mvr_big', table: 'holding', address: SPECIAL_ADDRESSES.uint64Max, type: 'uint64' },
          ]),
        ],
      },
      sink,
    );
    await waitFor(() => samples.filter((x) => x.variable === 'mvr_big').length >= 3, 'three cycles');
    expect(samples.every((x) => x.variable === 'mvr_big' && x.value === 18446744073709551615)).toBe(true);
    expect(m.source.status().samplesRefused.not_finite).toBeGreaterThanOrEqual(9);
    expect(m.lines.filter((l) => /beyond ±2\^53 rounded/.test(String(l.msg)))).toHaveLength(1);
    expect(m.lines.some((l) => l.msg === 'modbus value refused' && l.variable === 'mvr_nan32' && l.range === 'holding registers 1110-1111')).toBe(true);
  });

  it('joins nearby registers: requests counted at the server match the plan and respect §6 limits', async () => {
    const s = await sim();
    const { sink, samples } = memorySink();
    // 100 values: 40 float32 (80 registers with gaps of 0), 30 input registers 3 apart, 30 coils 5 apart,
    // plus 300 holding registers that must be split at 125.
    const registers = [
      ...Array.from({ length: 40 }, (_, i) => ({ variable: `mvr_f${i}`, table: 'holding', address: 100 + i * 2, type: 'float32' })),
      ...Array.from({ length: 30 }, (_, i) => ({ variable: `mvr_u${i}`, table: 'input', address: i * 3 })),
      ...Array.from({ length: 30 }, (_, i) => ({ variable: `mvr_c${i}`, table: 'coil', address: i * 5 })),
      ...Array.from({ length: 300 }, (_, i) => ({ variable: `mvr_r${i}`, table: 'holding', address: 2000 + i })),
    ];
    const m = await modbus({ devices: [device('many', s.port, registers)] }, sink);
    const poller = m.source.devicePollers()[0];
    expect(poller.currentBlocks().length).toBe(6); // coils, holding 100-179, holding 2000-2124, 2125-2249, 2250-2299, input 0-87
    await waitFor(() => Number(deviceStatus(m.source, 'many').cycles) >= 5, 'five cycles');
    await m.close();
    const cycles = Number(deviceStatus(m.source, 'many').cycles);
    const reads = s.requests().filter((r) => r.functionCode >= 1 && r.functionCode <= 4);
    expect(reads.length).toBe(cycles * 6);
    expect(Math.max(...reads.filter((r) => r.functionCode >= 3).map((r) => r.quantity))).toBe(125);
    expect(reads.filter((r) => r.functionCode === 1).every((r) => r.quantity === 146)).toBe(true);
    expect(samples.length).toBe(cycles * registers.length);
    expect(await metricValue(m.metrics, 'gateway_modbus_requests_per_cycle', { device: 'many' })).toBe(6);
  });

  it('reports exceptions by name with the register range, and isolates an illegal address inside a joined read', async () => {
    const s = await sim();
    const { sink, samples } = memorySink();
    const registers = [
      { variable: 'mvr_a', table: 'holding', address: 100 },
      { variable: 'mvr_b', table: 'holding', address: 105 },
      { variable: 'mvr_c', table: 'holding', address: 110, type: 'float32' },
      { variable: 'mvr_busy', table: 'input', address: 50 },
      { variable: 'mvr_broken', table: 'input', address: 300 },
    ];
    s.injectException(105, 105, 2, 'holding'); // the device lacks register 105
    s.injectException(300, 300, 4, 'input'); // server device failure
    const m = await modbus({ devices: [device('plc', s.port, registers)] }, sink);
    await waitFor(() => logged(m, /illegal data address/), 'illegal address logged');
    expect(
      m.lines.some(
        (l) => l.exception === 'illegal data address' && l.range === 'holding registers 100-111' && /answered exception 2 \(illegal data address\) to a read of holding registers 100-111 \(FC3\)/.test(String(l.msg)),
      ),
    ).toBe(true);
    expect(logged(m, /reading its values one by one/)).toBe(true);
    // After the split, a and c keep arriving; b is reported on its own.
    await waitFor(() => samples.some((x) => x.variable === 'mvr_a') && samples.some((x) => x.variable === 'mvr_c'), 'values next to the bad address');
    await waitFor(() => m.lines.some((l) => l.range === 'holding register 105' && l.exception === 'illegal data address'), 'bad address isolated');
    expect(samples.some((x) => x.variable === 'mvr_b')).toBe(false);
    expect(m.lines.some((l) => l.range === 'input register 300' && /exception 4 \(server device failure\)/.test(String(l.msg)))).toBe(true);
    expect(await metricValue(m.metrics, 'gateway_modbus_exceptions_total', { device: 'plc', exception: 'illegal_data_address' })).toBeGreaterThan(0);
    expect(await metricValue(m.metrics, 'gateway_modbus_exceptions_total', { device: 'plc', exception: 'server_device_failure' })).toBeGreaterThan(0);
    await waitFor(() => deviceStatus(m.source, 'plc').state === 'degraded' && m.source.status().state === 'degraded', 'device and source degraded');
    expect(m.source.status().lastError?.code).toMatch(/^MODBUS_(ILLEGAL_DATA_ADDRESS|SERVER_DEVICE_FAILURE)$/);
  });

  it('retries a busy device and recovers when the exception clears', async () => {
    const s = await sim();
    const { sink, samples } = memorySink();
    s.injectException(0, 0, 6, 'holding');
    // address_base 1: register 1 is protocol address 0; messages show both.
    const m = await modbus({ devices: [device('busy', s.port, [{ variable: 'mvr_x', table: 'holding', address: 1 }], { retries: 2, poll_interval: 200, address_base: 1 })] }, sink);
    await waitFor(() => m.lines.some((l) => /exception 6 \(server device busy\) to a read of holding register 1 \(protocol address 0\)/.test(String(l.msg))), 'busy reported');
    expect(s.requestCount({ functionCode: 3 })).toBeGreaterThanOrEqual(3); // first read and two retries
    expect(samples).toHaveLength(0);
    expect(s.requests()[0]).toMatchObject({ functionCode: 3, address: 0, quantity: 1 });
    await waitFor(() => deviceStatus(m.source, 'busy').state === 'degraded', 'device degraded while busy');
    s.clearFaults();
    await waitFor(() => samples.length > 0, 'value after the device is no longer busy');
    await waitFor(() => deviceStatus(m.source, 'busy').state === 'connected', 'device healthy again');
  });

  it('treats a device that stops answering as offline, backs off, and resumes', async () => {
    const s = await sim();
    const { sink, samples } = memorySink();
    const m = await modbus(
      { reconnect: { initial_delay: 200, max_delay: 400 }, devices: [device('slow', s.port, [{ variable: 'mvr_x', table: 'holding', address: 0 }, { variable: 'mvr_y', table: 'input', address: 0 }], { retries: 1 })] },
      sink,
    );
    await waitFor(() => samples.length > 0, 'first samples');
    s.setDelay(1_000); // longer than the 300 ms timeout
    await waitFor(() => deviceStatus(m.source, 'slow').state === 'offline', 'device offline');
    expect(m.source.status().lastError?.code).toBe('MODBUS_TIMEOUT');
    expect(m.lines.some((l) => /did not answer a read of (holding|input) register 0 within 300 ms \(2 attempts\)/.test(String(l.msg)))).toBe(true);
    expect(m.lines.some((l) => l.msg === 'modbus device not answering; polling it again after a backoff delay')).toBe(true);
    expect(m.source.status().state).toBe('disconnected');
    s.setDelay(0);
    const n = samples.length;
    await waitFor(() => samples.length > n + 2, 'samples again after the delay is gone', 20_000);
    await waitFor(() => deviceStatus(m.source, 'slow').state === 'connected', 'connected again');
  });

  it('treats "gateway target device failed to respond" as an offline device behind the gateway', async () => {
    const s = await sim({ unitId: 255 });
    const { sink, samples } = memorySink();
    s.injectFault({ unitId: 7, from: 0, to: 65535, exception: 11 });
    s.injectFault({ unitId: 8, from: 0, to: 65535, exception: 10 });
    const m = await modbus(
      {
        reconnect: { initial_delay: 300, max_delay: 600 },
        devices: [
          device('behind-gw', s.port, [{ variable: 'mvr_t', table: 'holding', address: 0 }], { unit_id: 7, retries: 0 }),
          device('unrouted', s.port, [{ variable: 'mvr_u', table: 'holding', address: 0 }], { unit_id: 8 }),
          device('fine', s.port, [{ variable: 'mvr_f', table: 'holding', address: 0 }], { unit_id: 1 }),
        ],
      },
      sink,
    );
    await waitFor(() => deviceStatus(m.source, 'behind-gw').state === 'offline', 'target behind the gateway offline');
    await waitFor(() => deviceStatus(m.source, 'unrouted').state === 'degraded', 'unrouted unit answered by the gateway');
    expect(m.lines.some((l) => /unit 7 .*exception 11 \(gateway target device failed to respond\)/.test(String(l.msg)))).toBe(true);
    expect(m.lines.some((l) => /unit 8 .*exception 10 \(gateway path unavailable\).*check unit_id/.test(String(l.msg)))).toBe(true);
    await waitFor(() => samples.filter((x) => x.variable === 'mvr_f').length > 3, 'the routed unit keeps delivering');
    expect(samples.some((x) => x.variable !== 'mvr_f')).toBe(false);
  });

  it('keeps polling a healthy device at its rate while another one is offline', async () => {
    const good = await sim();
    const bad = await sim();
    const { sink, samples } = memorySink();
    const m = await modbus(
      {
        devices: [
          device('good', good.port, [{ variable: 'mvr_good', table: 'holding', address: 0 }], { poll_interval: 100, timeout: 500 }),
          device('bad', bad.port, [{ variable: 'mvr_bad', table: 'holding', address: 0 }], { poll_interval: 100, timeout: 500, retries: 2 }),
        ],
      },
      sink,
    );
    await waitFor(() => samples.some((x) => x.variable === 'mvr_bad'), 'bad device delivering first');
    bad.setDelay(5_000); // stops answering: each attempt waits the full timeout
    await waitFor(() => deviceStatus(m.source, 'bad').state === 'offline', 'bad device offline');
    const from = samples.filter((x) => x.variable === 'mvr_good').length;
    const t0 = Date.now();
    // The time the good device takes for its next 10 values (1 s at its 10 Hz).
    await waitFor(() => samples.filter((x) => x.variable === 'mvr_good').length - from >= 10, 'ten values of the good device', 30_000);
    const rate = (samples.filter((x) => x.variable === 'mvr_good').length - from) / ((Date.now() - t0) / 1000);
    // 10 Hz configured; generous floor for a loaded 2-core machine, still far above what sharing
    // the offline device's 3 × 500 ms timeouts would allow (< 1 per second).
    expect(rate).toBeGreaterThan(3);
    expect(deviceStatus(m.source, 'good').state).toBe('connected');
    expect(m.source.status().state).toBe('degraded');
    await bad.close();
    await waitFor(() => deviceStatus(m.source, 'bad').state === 'disconnected', 'bad device waiting for its connection');
    expect(deviceStatus(m.source, 'good').state).toBe('connected');
  });

  it('reconnects by itself after the server restarts and after a connection reset', async () => {
    const first = await sim();
    const port = first.port;
    const { sink, samples } = memorySink();
    const m = await modbus({ reconnect: { initial_delay: 200, max_delay: 500 }, devices: [device('plc', port, [{ variable: 'mvr_x', table: 'holding', address: 1000, type: 'int16' }])] }, sink);
    await waitFor(() => samples.length > 0, 'first samples');
    await first.close();
    await waitFor(() => deviceStatus(m.source, 'plc').state === 'disconnected', 'connection loss noticed');
    expect(m.source.status().state).toBe('disconnected');
    // A few refused reconnect attempts.
    await waitFor(async () => (await metricValue(m.metrics, 'gateway_source_reconnects_total', { source: 'modbus' })) >= 2, 'two refused reconnect attempts');
    const second = await sim({ port, device: first.device });
    const n = samples.length;
    await waitFor(() => samples.length > n + 2, 'samples after the restart', 20_000);
    expect(samples.at(-1)!.value).toBe(-12345);
    expect(await metricValue(m.metrics, 'gateway_source_reconnects_total', { source: 'modbus' })).toBeGreaterThan(0);
    // A reset (RST) of the open connection is noticed and healed the same way.
    const k = samples.length;
    second.dropConnections();
    await waitFor(() => samples.length > k + 3, 'samples after a connection reset', 20_000);
    expect(second.connectionCount()).toBe(1);
  });

  it('shares one connection between devices at the same address (different unit ids behind a gateway)', async () => {
    const s = await sim({ unitId: 255 });
    const { sink, samples } = memorySink();
    const m = await modbus(
      {
        devices: [
          device('unit1', s.port, [{ variable: 'mvr_u1', table: 'holding', address: 1000, type: 'int16' }], { unit_id: 1 }),
          device('unit2', s.port, [{ variable: 'mvr_u2', table: 'holding', address: 1004, type: 'uint16' }], { unit_id: 2 }),
        ],
      },
      sink,
    );
    await waitFor(() => samples.some((x) => x.variable === 'mvr_u1') && samples.some((x) => x.variable === 'mvr_u2'), 'both units');
    expect(s.connectionCount()).toBe(1);
    expect(s.requestCount({ unitId: 1 })).toBeGreaterThan(0);
    expect(s.requestCount({ unitId: 2 })).toBeGreaterThan(0);
    expect((m.source.status().detail?.connections as unknown[]).length).toBe(1);
  });

  it('survives whatever a broken device sends, counting it as a bad response', async () => {
    // A "device" answering every request with a different kind of damaged frame.
    let n = 0;
    const sockets = new Set<net.Socket>();
    const server = net.createServer((sock) => {
      sockets.add(sock);
      sock.on('error', () => undefined);
      sock.on('data', (req) => {
        const tid = req.readUInt16BE(0);
        const mbap = (pdu: number[]) => Buffer.concat([Buffer.from([tid >> 8, tid & 0xff, 0, 0, 0, pdu.length]), Buffer.from(pdu)]);
        const kind = n++ % 5;
        if (kind === 0) sock.write(mbap([1, 3, 4, 0x12, 0x34])); // byte count 4, two bytes follow
        else if (kind === 1) sock.write(mbap([1, 3, 2, 0x12, 0x34, 0x56, 0x78])); // byte count 2, four bytes follow
        else if (kind === 2) sock.write(mbap([1, 4, 4, 0, 1, 0, 2])); // wrong function code
        else if (kind === 3) sock.write(mbap([1, 3, 4, 0, 7, 0, 9])); // a correct answer now and then
        else sock.write(Buffer.from([0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 1, 3, 0])); // header announcing 65535 bytes: the stream is out of step
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(r); }));
    const port = (server.address() as net.AddressInfo).port;
    const { sink, samples } = memorySink();
    const m = await modbus({ reconnect: { initial_delay: 100, max_delay: 200 }, devices: [device('broken', port, [{ variable: 'mvr_x', table: 'holding', address: 0, type: 'uint32' }], { retries: 0, timeout: 200 })] }, sink);
    await waitFor(() => n >= 12 && samples.length > 0, 'damaged answers and a good one', 30_000);
    expect(m.source.status().lastError).not.toBeNull();
    expect(await metricValue(m.metrics, 'gateway_source_errors_total', { source: 'modbus', code: 'MODBUS_BAD_RESPONSE' })).toBeGreaterThan(0);
    // Every sample that got through is the correct answer's value, nothing made up from garbage.
    expect(samples.length).toBeGreaterThan(0);
    expect(samples.every((x) => x.value === 0x00070009)).toBe(true);
    // Out of step after the bogus header, the connection only heals by reconnecting.
    expect(await metricValue(m.metrics, 'gateway_source_reconnects_total', { source: 'modbus' })).toBeGreaterThan(0);
  });

  it('closes promptly even while a request waits for a long timeout', async () => {
    const s = await sim();
    s.injectSilence(0, 10);
    const { sink } = memorySink();
    const m = await modbus({ devices: [device('silent', s.port, [{ variable: 'mvr_x', table: 'holding', address: 0 }], { timeout: '30s' })] }, sink);
    await waitFor(() => s.requestCount() > 0, 'request sent');
    const t0 = Date.now();
    await m.close();
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(m.source.status().state).toBe('stopped');
  });
});
