import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, runCli } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 12 §3, the secrets that came back from outside:
 * - an upstream whose error messages echo the request headers (Authorization: Bearer <API key>)
 *   must not carry the key into the log, /status, set-aside reasons, the annotation outbox, the
 *   panel or CLI output;
 * - `DEBUG=mqttjs*` (which the MQTT guide suggests) must not print the MQTT password.
 * A real `edge-gateway run` child with both, against a hostile upstream that echoes every header.
 */

const API_KEY = 'S3CRET-apikey-echo-Qw8Z';
const MQTT_PASSWORD = 'S3CRET-mqttpw-echo-Lp3X';
const NEEDLES = [API_KEY, MQTT_PASSWORD].flatMap((s) => [s, Buffer.from(s).toString('base64'), encodeURIComponent(s)]);
const leaks = (text: string) => [...new Set(NEEDLES.filter((n) => text.includes(n)))];

const dir = mkdtempSync(join(tmpdir(), 'gw-secrets-echo-'));
const children: ChildProcess[] = [];
let upstream: Server | undefined;
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await new Promise((r) => (upstream ? upstream.close(r) : r(undefined)));
  rmSync(dir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A tracking service that refuses everything with a 400 whose message echoes the request headers. */
async function startEchoingUpstream(): Promise<string> {
  upstream = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const echoed = Object.entries(req.headers).map(([k, v]) => `${k}: ${String(v)}`).join('; ');
      res.statusCode = 400;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ error: { type: 'invalid_request_error', code: 'invalid_request', message: `could not process request (headers: ${echoed})` } }));
    });
  });
  await new Promise<void>((r) => upstream!.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
}

async function get(url: string): Promise<string> {
  const r = await request(url);
  return r.body.text();
}

describe('secrets echoed by an upstream or printed by a library never reach an operator', () => {
  it('redacts the API key from everything derived from upstream errors, and the MQTT password from DEBUG=mqttjs* output', async () => {
    const base = await startEchoingUpstream();
    const broker = await freePort();
    const file = join(dir, 'gw.yaml');
    writeFileSync(
      file,
      `
gateway: { name: gw-echo, data_dir: ${join(dir, 'data')}, status_interval: 1s }
log: { level: debug, format: json }
service:
  base_url: ${base}/tracking/v1
  organisation_id: org_demo
  auth: { mode: api_key, api_key: { env: TEST_API_KEY } }
  request_timeout: 5s
uplink: { flush_interval: 100 }
buffer: { path: ${join(dir, 'buffer.db')} }
http: { enabled: true, host: 127.0.0.1, port: 0 }
generator:
  - { name: gen, variables: [mvr_gen_1], interval: 200ms }
mqtt:
  broker: { enabled: true, host: 127.0.0.1, port: ${broker}, username: plc, password: { env: TEST_MQTT_PASSWORD } }
  connections:
    - name: plant
      url: mqtt://127.0.0.1:${broker}
      username: plc
      password: { env: TEST_MQTT_PASSWORD }
      subscriptions: [ { topic: plant/rate, format: number, variable: mvr_packer1_rate } ]
annotations:
  site: { external_id: plant-demo }
  machines: [ { key: press1, machine_variables: [mvr_press1_state] } ]
`,
    );
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'run', '--config', file], {
      cwd: ROOT,
      env: { ...process.env, TEST_API_KEY: API_KEY, TEST_MQTT_PASSWORD: MQTT_PASSWORD, DEBUG: 'mqttjs*' },
    });
    children.push(child);
    let out = '';
    let err = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const started = await waitFor(() => out.split('\n').find((l) => l.includes('"gateway started"')), { timeoutMs: 60_000, what: `gateway started (${(out + err).slice(-2_000)})` });
    const url = (JSON.parse(started) as { http: string }).http;

    // Samples refused by the upstream (every item, 400) are set aside with the upstream's reason.
    await waitFor(async () => JSON.parse(await get(`${url}/status`)).set_aside.samples > 0, { timeoutMs: 30_000, what: 'set-aside samples' });
    // An annotation refused by the upstream keeps the upstream's message in the outbox.
    const posted = await request(`${url}/api/annotations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'instant', occurred_at: new Date().toISOString(), text: 'shift handover', machine: 'press1' }) });
    expect(posted.statusCode).toBe(201);
    await posted.body.text();
    await waitFor(async () => /could not process request/.test(await get(`${url}/api/annotations`)), { timeoutMs: 30_000, what: 'annotation refused upstream' });
    // The MQTT connection logs in (mqtt.js prints its options under DEBUG=mqttjs*).
    await waitFor(async () => JSON.parse(await get(`${url}/status`)).sources.find((s: { name: string }) => s.name === 'plant')?.state === 'connected', { what: 'MQTT connected' });
    const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${broker}`, { username: 'plc', password: MQTT_PASSWORD, reconnectPeriod: 0 });
    await pub.publishAsync('plant/rate', '5', { qos: 1 });
    await pub.endAsync();

    const seen: Array<[string, string]> = [];
    for (const path of ['/status', '/api/set-aside', '/api/annotations', '/api/panel', '/']) seen.push([path, await get(`${url}${path}`)]);
    const cli = await Promise.all([runCli(['status', '--url', url]), runCli(['status', '--url', url, '--json']), runCli(['set-aside', 'list', '--url', url])]);
    cli.forEach((r, i) => seen.push([`cli ${i}`, r.out + r.err]));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    seen.push(['stdout', out], ['stderr (DEBUG=mqttjs*)', err]);

    // The echoed text is there, with the credential replaced, so the test looks at the right text.
    expect(seen.find(([w]) => w === '/api/set-aside')![1]).toContain('Bearer [redacted]');
    expect(seen.find(([w]) => w === '/api/annotations')![1]).toContain('[redacted]');
    expect(err).toMatch(/mqttjs:client/);
    expect(err).toContain('[redacted]');
    for (const [where, text] of seen) expect({ where, leaks: leaks(text) }).toEqual({ where, leaks: [] });
  }, 180_000);
});
