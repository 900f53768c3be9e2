import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway } from '../../helpers/gateway.js';
import { startEmulator } from '../../../src/emulator/index.js';
import { DEMO_FIXTURE } from '../../../src/emulator/demo-fixture.js';
import { waitFor } from '../../helpers/wait.js';
import { captureLogger } from '../mqtt/helpers.js';

/**
 * Issue 12 §1: a peer flooding an RTU-over-TCP link with garbage (~13 MB/s) drove the CPU to
 * 265 % and /healthz to 4.7 s. The link now bounds what it holds, drops the flooding peer and
 * backs off; /healthz keeps answering fast throughout.
 */

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanups.length) await Promise.resolve(cleanups.pop()!()).catch(() => undefined);
});

/** A TCP peer in its own process writing random bytes as fast as the socket takes them. */
const FLOODER = `
const net = require('node:net');
const crypto = require('node:crypto');
const chunk = crypto.randomBytes(65536);
let connections = 0, bytes = 0;
const server = net.createServer((s) => {
  connections++;
  s.on('error', () => {});
  const pump = () => { while (!s.destroyed && s.write(chunk)) bytes += chunk.length; };
  s.on('drain', pump);
  pump();
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));
setInterval(() => console.log(JSON.stringify({ connections, bytes })), 500);
`;

async function startFlooder(): Promise<{ port: number; stats: () => { connections: number; bytes: number } }> {
  const child: ChildProcess = spawn(process.execPath, ['-e', FLOODER], { stdio: ['ignore', 'pipe', 'inherit'] });
  cleanups.push(() => child.kill('SIGKILL'));
  let last = { connections: 0, bytes: 0 };
  let port = 0;
  child.stdout!.setEncoding('utf8');
  let pending = '';
  child.stdout!.on('data', (d: string) => {
    pending += d;
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const l of lines) {
      const m = JSON.parse(l) as { port?: number; connections?: number; bytes?: number };
      if (m.port) port = m.port;
      else last = m as typeof last;
    }
  });
  await waitFor(() => port > 0, { what: 'flooder listening' });
  return { port, stats: () => last };
}

describe('Modbus RTU over TCP under a byte flood', () => {
  it('drops the flooding peer and keeps /healthz fast', async () => {
    const emu = await startEmulator({ port: 0, fixture: DEMO_FIXTURE });
    cleanups.push(() => emu.close());
    const flooder = await startFlooder();
    const log = captureLogger();
    const gw = await startTestGateway(emu, {
      http: { enabled: true, host: '127.0.0.1', port: 0 },
      modbus: {
        devices: [
          {
            name: 'meter',
            transport: 'rtu_over_tcp',
            host: '127.0.0.1',
            port: flooder.port,
            unit_id: 3,
            poll_interval: 100,
            timeout: 300,
            registers: [{ variable: 'mvr_mixer1_speed', table: 'holding', address: 0 }],
          },
        ],
      },
    }, { logger: log.logger });
    cleanups.push(() => gw.destroy());
    await waitFor(() => flooder.stats().connections >= 1, { what: 'the gateway connected to the flooder' });

    // Ask /healthz 30 times while the flood goes on; every answer must be quick.
    const latencies: number[] = [];
    const bytesBefore = flooder.stats().bytes;
    for (let i = 0; i < 30; i++) {
      const t0 = performance.now();
      const r = await request(`${gw.handle.httpUrl}/healthz`);
      await r.body.text();
      latencies.push(performance.now() - t0);
      await new Promise((res) => setTimeout(res, 100));
    }
    latencies.sort((a, b) => a - b);
    const median = latencies[15];
    const max = latencies[latencies.length - 1];
    console.log(`/healthz under an RTU-over-TCP flood: median ${median.toFixed(1)} ms, max ${max.toFixed(1)} ms; flooder sent ${((flooder.stats().bytes - bytesBefore) / 1e6).toFixed(1)} MB in ${flooder.stats().connections} connections`);
    // Generous for a busy 2-core machine; before the guard the median was seconds.
    expect(median).toBeLessThan(200);
    expect(max).toBeLessThan(1_500);
    expect(log.text()).toContain('modbus peer floods the link; connection dropped');
    expect(log.text()).toMatch(/bytes received without a complete answer|bytes in one second/);
  }, 120_000);
});
