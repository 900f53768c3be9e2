/**
 * Modbus polling benchmark: 2,000 registers across 10 devices polled at 10 Hz.
 *
 * Measures, for the gateway's Modbus source and for a baseline doing the same reads with a bare
 * modbus-serial client loop (one request per coalesced block, no decoding, no buffer):
 *   - achieved cycle rate per device (target 10/s),
 *   - requests per cycle, counted at the simulated devices,
 *   - CPU (% of one core) and RSS of the polling process.
 *
 * The 10 simulated devices run in their own process, and each side runs in a fresh process of its
 * own, so CPU and RSS belong to the polling alone. Samples go to a counting sink (no SQLite), so the
 * numbers are the Modbus path only.
 *
 *   npx tsx bench/modbus-poll.ts
 *   MODBUS_BENCH_SECONDS=5 npx tsx bench/modbus-poll.ts     # quick run
 *
 * Env: MODBUS_BENCH_SECONDS (measured, default 15), MODBUS_BENCH_WARMUP (default 3),
 *      MODBUS_BENCH_DEVICES (default 10), MODBUS_BENCH_HZ (default 10).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import modbusSerial from 'modbus-serial';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { SourceStats } from '../src/core/source.js';
import { startModbusSimulator, type ModbusSimulator } from '../src/sim/modbus-device.js';
import { modbusSectionSchema, type ModbusSectionConfig } from '../src/sources/modbus/config.js';
import { createModbusSources, type ModbusSource } from '../src/sources/modbus/index.js';
import { planSection } from '../src/sources/modbus/plan.js';
import { envNumber, smokeBanner, table } from './lib.js';

const SECONDS = envNumber('MODBUS_BENCH_SECONDS', 15, 2);
const WARMUP = envNumber('MODBUS_BENCH_WARMUP', 3, 1);
const DEVICES = envNumber('MODBUS_BENCH_DEVICES', 10, 2);
const HZ = envNumber('MODBUS_BENCH_HZ', 10);
const SELF = fileURLToPath(import.meta.url);

/**
 * 200 registers per device, 120 values: 60 float32 three registers apart (one unused register
 * between them), 40 uint16 two apart, 20 int32 packed in the input registers.
 */
function registersOfDevice(d: number) {
  return [
    ...Array.from({ length: 60 }, (_, i) => ({ variable: `mvr_d${d}_f${i}`, table: 'holding', address: i * 3, type: 'float32' })),
    ...Array.from({ length: 40 }, (_, i) => ({ variable: `mvr_d${d}_u${i}`, table: 'holding', address: 300 + i * 2, type: 'uint16' })),
    ...Array.from({ length: 20 }, (_, i) => ({ variable: `mvr_d${d}_i${i}`, table: 'input', address: i * 2, type: 'int32' })),
  ];
}

function sectionFor(ports: number[]): ModbusSectionConfig {
  return modbusSectionSchema.parse({
    devices: ports.map((port, d) => ({ name: `dev${d}`, host: '127.0.0.1', port, poll_interval: Math.round(1000 / HZ), timeout: 1000, registers: registersOfDevice(d) })),
  })!;
}

interface PhaseResult {
  cyclesPerSecondPerDevice: number;
  cycles: number;
  cpuPercent: number;
  rssMb: number;
  samples: number;
}

// ---------------------------------------------------------------- simulators (own process)
async function runSimulators(): Promise<void> {
  const sims: ModbusSimulator[] = [];
  for (let d = 0; d < DEVICES; d++) sims.push(await startModbusSimulator({ port: 0, demo: false }));
  process.send!({ ports: sims.map((s) => s.port) });
  process.on('message', (msg: { cmd: string }) => {
    if (msg.cmd === 'reset') for (const s of sims) s.resetRequestCount();
    if (msg.cmd === 'count') process.send!({ requests: sims.reduce((n, s) => n + s.requestCount(), 0) });
    if (msg.cmd === 'exit') void Promise.all(sims.map((s) => s.close())).then(() => process.exit(0));
  });
}

// ---------------------------------------------------------------- measured window helper
async function measure(run: { cycles(): number; samples(): number }, simulators: { reset(): Promise<void> }): Promise<PhaseResult> {
  await new Promise((r) => setTimeout(r, WARMUP * 1000));
  await simulators.reset();
  const c0 = run.cycles();
  const s0 = run.samples();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let rss = process.memoryUsage().rss;
  const sampler = setInterval(() => (rss = Math.max(rss, process.memoryUsage().rss)), 250);
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  clearInterval(sampler);
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const cycles = run.cycles() - c0;
  return {
    cyclesPerSecondPerDevice: cycles / elapsed / DEVICES,
    cycles,
    cpuPercent: ((cpu.user + cpu.system) / 1000 / (elapsed * 1000)) * 100,
    rssMb: rss / 1e6,
    samples: run.samples() - s0,
  };
}

/** The simulator process, seen from a phase process (through the parent). */
function simulatorProxy() {
  return {
    reset: () =>
      new Promise<void>((resolve) => {
        process.send!({ cmd: 'reset' });
        resolve();
      }),
  };
}

// ---------------------------------------------------------------- baseline: bare modbus-serial
async function runBaseline(ports: number[]): Promise<PhaseResult> {
  const plan = planSection(sectionFor(ports));
  let cycles = 0;
  let stopped = false;
  const loops = plan.devices.map(async (device, d) => {
    const client = new modbusSerial.default();
    client.on('error', () => undefined);
    client.setTimeout(1000);
    await client.connectTCP('127.0.0.1', { port: ports[d] });
    client.setID(1);
    const interval = 1000 / HZ;
    let next = performance.now();
    while (!stopped) {
      for (const b of device.blocks) {
        if (b.table === 'holding') await client.readHoldingRegisters(b.start, b.count);
        else await client.readInputRegisters(b.start, b.count);
      }
      cycles += 1;
      next += interval;
      const now = performance.now();
      if (next < now) next = now;
      await new Promise((r) => setTimeout(r, next - now));
    }
    client.close(() => undefined);
  });
  const result = await measure({ cycles: () => cycles, samples: () => 0 }, simulatorProxy());
  stopped = true;
  await Promise.race([Promise.all(loops), new Promise((r) => setTimeout(r, 2000))]);
  return result;
}

// ---------------------------------------------------------------- the gateway's source
async function runSource(ports: number[]): Promise<PhaseResult> {
  const metrics = createMetrics();
  let samples = 0;
  const [source] = createModbusSources(sectionFor(ports), (name, kind) => ({
    sink: { append: async (s) => void (samples += s.length) },
    logger: silentLogger(),
    stats: new SourceStats(name, kind, metrics, systemClock),
    metrics,
    clock: systemClock,
    dataDir: '/tmp',
  })) as ModbusSource[];
  await source.start();
  const cycles = () => source.devicePollers().reduce((n, d) => n + Number(d.status().cycles), 0);
  const result = await measure({ cycles, samples: () => samples }, simulatorProxy());
  await source.close();
  return result;
}

// ---------------------------------------------------------------- orchestration
function child(role: string, ports?: number[]): ChildProcess {
  return fork(SELF, [`--role=${role}`, ...(ports ? [`--ports=${ports.join(',')}`] : [])], { execArgv: process.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

async function phase(role: 'baseline' | 'source', ports: number[], sim: ChildProcess): Promise<PhaseResult & { serverRequests: number }> {
  const p = child(role, ports);
  let serverRequests = 0;
  const result = await new Promise<PhaseResult>((resolve, reject) => {
    p.on('message', (msg: { cmd?: string; result?: PhaseResult }) => {
      if (msg.cmd === 'reset') sim.send({ cmd: 'reset' });
      if (msg.result) {
        // Count at the devices right at the end of the window.
        sim.send({ cmd: 'count' });
        sim.once('message', (m: { requests?: number }) => {
          serverRequests = m.requests ?? 0;
          resolve(msg.result!);
        });
      }
    });
    p.once('exit', (code) => (code === 0 ? undefined : reject(new Error(`${role} process exited with ${code}`))));
  });
  p.kill();
  return { ...result, serverRequests };
}

async function main(): Promise<void> {
  const role = process.argv.find((a) => a.startsWith('--role='))?.slice(7);
  const ports = process.argv.find((a) => a.startsWith('--ports='))?.slice(8).split(',').map(Number) ?? [];
  if (role === 'sim') return runSimulators();
  if (role === 'baseline' || role === 'source') {
    const result = role === 'baseline' ? await runBaseline(ports) : await runSource(ports);
    process.send!({ result });
    return;
  }

  smokeBanner(`MODBUS_BENCH_SECONDS ${SECONDS}, MODBUS_BENCH_WARMUP ${WARMUP}, MODBUS_BENCH_DEVICES ${DEVICES}`);
  const sim = child('sim');
  const simPorts = await new Promise<number[]>((resolve) => sim.once('message', (m: { ports: number[] }) => resolve(m.ports)));
  const values = registersOfDevice(0).length;
  const plan = planSection(sectionFor(simPorts));
  const blocks = plan.devices[0].blocks.length;
  console.log(`Modbus poll benchmark: ${DEVICES} devices × 200 registers (${values} values, ${blocks} requests per cycle after joining) at ${HZ} Hz`);
  console.log(`${WARMUP} s warm-up, ${SECONDS} s measured per side; ${cpus().length} CPU cores. The machine is shared and noisy: read the ratios, not the absolute numbers.`);
  console.log('Without joining nearby registers the same values would take', values, 'requests per cycle per device.\n');

  const baseline = await phase('baseline', simPorts, sim);
  const source = await phase('source', simPorts, sim);
  sim.send({ cmd: 'exit' });

  const row = (side: string, r: PhaseResult & { serverRequests: number }, samples: boolean) => ({
    side,
    'cycles/s/device': r.cyclesPerSecondPerDevice.toFixed(2),
    'requests/cycle': (r.serverRequests / Math.max(1, r.cycles)).toFixed(2),
    'CPU % of a core': r.cpuPercent.toFixed(1),
    'RSS MB': r.rssMb.toFixed(0),
    // The bare loop reads the registers and decodes nothing: it makes no samples.
    'samples/s': samples ? (r.samples / SECONDS).toFixed(0) : '-',
  });
  const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(2) : 'n/a (baseline 0)');
  console.log(
    table([
      row('bare modbus-serial loop', baseline, false),
      row('gateway modbus source', source, true),
      {
        side: 'ratio source / bare',
        'cycles/s/device': ratio(source.cyclesPerSecondPerDevice, baseline.cyclesPerSecondPerDevice),
        'requests/cycle': ratio(source.serverRequests / Math.max(1, source.cycles), baseline.serverRequests / Math.max(1, baseline.cycles)),
        'CPU % of a core': ratio(source.cpuPercent, baseline.cpuPercent),
        'RSS MB': ratio(source.rssMb, baseline.rssMb),
        'samples/s': '',
      },
    ]),
  );
  console.log(`\nrequests/cycle is counted at the simulated devices (every request they received in the window / cycles completed).`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
