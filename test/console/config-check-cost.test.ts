import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 21 §3: what a posted dry-run check may cost a running gateway (`edge-gateway run` in a child
 * process, so that a check that freezes it cannot freeze the test): secret files are not opened,
 * 60 kB with hundreds of problems is answered at once without holding the event loop, and a
 * text beyond the limit is refused.
 */
const ROOT = join(import.meta.dirname, '..', '..');
let emu: EmulatorHandle;
let dir: string;
let child: ChildProcess | null = null;
let url: string;

const BASE = (secret: string) => `service:
  base_url: BASE_URL
  auth_url: AUTH_URL
  organisation_id: org_demo
  auth: { mode: client_credentials, client_id: demo-gateway, client_secret: ${secret} }
`;

beforeAll(async () => {
  emu = await startEmulator({ port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'config-check-cost-'));
  const file = join(dir, 'gateway.yaml');
  writeFileSync(
    file,
    `${BASE('{ env: CHECK_COST_SECRET }').replace('BASE_URL', emu.baseUrl).replace('AUTH_URL', emu.authUrl)}gateway: { name: cost, data_dir: ${join(dir, 'data')}, status_interval: 0 }
log: { level: info, format: json }
buffer: { path: ${join(dir, 'buffer.db')} }
http: { enabled: true, host: 127.0.0.1, port: 0, max_body_bytes: 1MB }
`,
  );
  child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'run', '--config', file], { cwd: ROOT, env: { ...process.env, CHECK_COST_SECRET: 'demo-secret' } });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const started = await waitFor(() => out.split('\n').find((l) => l.includes('"gateway started"')), { timeoutMs: 120_000, intervalMs: 100, what: `gateway started (output: ${out.slice(-2_000)})` });
  url = (JSON.parse(started) as { http: string }).http;
}, 150_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }
  await emu?.close();
  rmSync(dir, { recursive: true, force: true });
});

const check = (yaml: string, timeoutMs: number) =>
  fetch(`${url}/console/api/config/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ yaml }), signal: AbortSignal.timeout(timeoutMs) });

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

describe('the console dry-run check on a running gateway', () => {
  it('opens no secret file: a FIFO and /dev/zero are validated as paths and answered at once', async () => {
    const fifo = join(dir, 'secret.fifo');
    execFileSync('mkfifo', [fifo]);
    const rssBefore = rssMb(child!.pid!);
    // The FIFO first: on a gateway that opens it, the open waits for a writer and the request never
    // ends, so /dev/zero (which grows a reader by 1 GB/s) is never sent.
    for (const path of [fifo, '/dev/zero']) {
      const res = await check(BASE(`{ file: ${path} }`).replace('BASE_URL', emu.baseUrl).replace('AUTH_URL', emu.authUrl), 15_000);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { ok: boolean; problems: unknown[] };
      expect({ path, ok: body.ok, problems: body.problems }).toEqual({ path, ok: true, problems: [] });
    }
    expect(rssMb(child!.pid!) - rssBefore).toBeLessThan(200);
  }, 60_000);

  it('answers 60 kB with hundreds of problems at once, the first 100 with their lines, without holding the event loop', async () => {
    let text = `${BASE('{ env: X }').replace('BASE_URL', emu.baseUrl).replace('AUTH_URL', emu.authUrl)}opcua:\n  servers:\n    - name: plc1\n      endpoint: opc.tcp://127.0.0.1:4840\n      nodes:\n`;
    let i = 0;
    while (text.length < 60_000) text += `        - { node_id: "ns=2;s=Line3.Press${i}.Temperature", variable: BAD_press${i++}_temperature }\n`;
    // The event loop's longest stall seen from outside: /healthz asked every 20 ms during the check.
    let worst = 0;
    let done = false;
    const probe = (async () => {
      while (!done) {
        const t = performance.now();
        await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(60_000) }).then((r) => r.arrayBuffer());
        worst = Math.max(worst, performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const started = performance.now();
    const res = await check(text, 30_000).finally(() => (done = true));
    const took = performance.now() - started;
    await probe;
    expect(res.status).toBe(200);
    const body = (await res.json()) as { ok: boolean; problems: Array<{ path: string; line: number; message: string }>; more_problems: number };
    expect(body.ok).toBe(false);
    expect(body.problems).toHaveLength(100);
    expect(body.more_problems).toBe(i - 100);
    const lines = text.split('\n');
    expect(body.problems[0]).toMatchObject({ path: 'opcua.servers[0].nodes[0].variable', line: lines.findIndex((l) => l.includes('BAD_press0_')) + 1 });
    expect(body.problems[99]).toMatchObject({ path: 'opcua.servers[0].nodes[99].variable', line: lines.findIndex((l) => l.includes('BAD_press99_')) + 1 });
    // Generous bounds for a busy 2-core machine; bench/console-config-check.ts measures the block.
    expect(took).toBeLessThan(10_000);
    expect(worst).toBeLessThan(1_000);
  }, 90_000);

  it('refuses a text beyond 256 KiB, naming the size', async () => {
    const text = `${BASE('{ env: X }').replace('BASE_URL', emu.baseUrl).replace('AUTH_URL', emu.authUrl)}${'# padding line of a configuration that is far too long\n'.repeat(5_000)}`;
    const res = await check(text, 30_000);
    const body = (await res.json()) as { ok: boolean; problems: Array<{ message: string }> };
    expect(body.ok).toBe(false);
    expect(body.problems[0].message).toMatch(/^the configuration is 27\d,\d{3} bytes, more than the 256 KiB the console checks/);
  }, 60_000);
});
