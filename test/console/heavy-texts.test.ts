import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get as httpGet, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify as toYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import { silentLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { testConfigInput } from '../helpers/gateway.js';

/**
 * The console's work on large texts never holds the gateway's event loop: a dry-run check of
 * 30,000 keys (17 s of blocked loop before), a CSV import of 20,000 OPC UA rows, the documented
 * limit (18.6 s before), the mappings of the 4 MB text that import makes, and a 4 MB alias bomb,
 * each posted over real HTTP while /healthz is asked every 50 ms from another connection. The
 * bound on /healthz is generous (a busy two-core machine answers it in milliseconds; the blocks
 * before were tens of seconds); the answers are checked in full.
 */
let emu: EmulatorHandle;
let gw: GatewayHandle;
let dir: string;

beforeAll(async () => {
  emu = await startEmulator({ port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'heavy-texts-'));
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, toYaml(testConfigInput(emu, dir, { http: { enabled: true, port: 0, max_body_bytes: 10_000_000, rate_limit_per_minute: 100_000 } })));
  gw = await startGateway(loadConfigFile(file).config, { configPath: file, logger: silentLogger() });
});

afterAll(async () => {
  await gw?.close();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * A POST on a connection of its own (a kept-alive one the server closes after 5 idle seconds can
 * meet a large POST on a busy machine). The body is serialized before (`json`) and the answer
 * parsed when read: this test runs in the gateway's own thread, so neither may fall in the window
 * that measures the gateway's event loop.
 */
function post(path: string, data: Buffer): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${gw.httpUrl}${path}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': data.length } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        let parsed: Record<string, unknown> | undefined;
        resolve({
          status: res.statusCode ?? 0,
          get body() {
            return (parsed ??= JSON.parse(raw.toString('utf8')) as Record<string, unknown>);
          },
        });
      });
    });
    req.on('error', reject);
    req.end(data);
  });
}

const json = (body: unknown): Buffer => Buffer.from(JSON.stringify(body));

function healthz(): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const req = httpGet(`${gw.httpUrl}/healthz`, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
  });
}

/** Runs `fn` while /healthz is asked every 50 ms; answers the slowest /healthz answer too. */
async function whileHealthz<T>(fn: () => Promise<T>): Promise<{ result: T; slowestMs: number; asked: number }> {
  let slowest = 0;
  let asked = 0;
  let running = true;
  const poll = (async () => {
    while (running) {
      const t = performance.now();
      // A connection of its own each time: an idle keep-alive connection the server closes can
      // meet a request on a busy machine (ECONNRESET), which is not what is measured here.
      expect(await healthz()).toBe(200);
      slowest = Math.max(slowest, performance.now() - t);
      asked += 1;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    return { result: await fn(), slowestMs: slowest, asked };
  } finally {
    running = false;
    await poll;
  }
}

/** Generous: the blocks this guards against were 17-25 s. */
const HEALTHZ_BOUND_MS = 3_000;

describe('large texts from the console, beside /healthz', () => {
  it('checks 30,000 distinct keys (240 kB): every unknown setting counted, /healthz answered throughout', async () => {
    const yaml = Array.from({ length: 30_000 }, (_, i) => `k${i.toString(36)}: 1`).join('\n');
    expect(Buffer.byteLength(yaml)).toBeLessThan(256 * 1024);
    const data = json({ yaml });
    const { result, slowestMs, asked } = await whileHealthz(() => post('/console/api/config/check', data));
    expect(result.status).toBe(200);
    // The first 100 problems with their lines (the console lists no more), the rest counted.
    expect(result.body).toMatchObject({ ok: false, more_problems: 2 });
    const problems = result.body.problems as Array<{ message: string; line: number | null }>;
    expect(problems).toHaveLength(100);
    expect(problems).toContainEqual({ path: 'k0', line: 1, message: 'k0: unknown setting' });
    expect(problems.at(-1)).toEqual({ path: 'k2q', line: 99, message: 'k2q: unknown setting' });
    expect(asked).toBeGreaterThan(0);
    expect(slowestMs).toBeLessThan(HEALTHZ_BOUND_MS);
  }, 120_000);

  it('imports 20,000 OPC UA rows (4 MB of CSV), lists the 4 MB text it makes, /healthz answered throughout', async () => {
    const yaml = 'opcua:\n  servers:\n    - name: plc1\n      endpoint: opc.tcp://10.0.0.1:4840\n      nodes:\n        - { node_id: "ns=2;s=Seed", variable: mvr_seed }   # seed\n';
    const rows = ['kind,source,variable,node_id,comment'];
    for (let i = 0; i < 20_000; i++) rows.push(`opcua,plc1,mvr_line1_tag_${i},ns=2;s=Line1.Area${i % 40}.Tag${i},Line1/Area${i % 40}/Tag${i} (Double) from the tag list of line 1 ${'-'.repeat(80)}`);
    const csv = rows.join('\r\n');
    expect(csv.length).toBeGreaterThan(3_500_000);
    const data = json({ yaml, csv });
    const imported = await whileHealthz(() => post('/console/api/config/import-csv', data));
    expect(imported.result.status).toBe(200);
    const r = imported.result.body as { yaml: string; added: number; problems: unknown[]; rows: number };
    expect({ rows: r.rows, added: r.added, problems: r.problems }).toEqual({ rows: 20_000, added: 20_000, problems: [] });
    const nodes = (parse(r.yaml) as { opcua: { servers: Array<{ nodes: Array<{ node_id: string; variable: string }> }> } }).opcua.servers[0].nodes;
    expect(nodes).toHaveLength(20_001);
    expect(nodes[20_000]).toEqual({ node_id: 'ns=2;s=Line1.Area39.Tag19999', variable: 'mvr_line1_tag_19999' });
    // Written as the seed line is: flow style, the node id quoted.
    expect(r.yaml).toContain('        - { node_id: "ns=2;s=Line1.Area0.Tag0", variable: mvr_line1_tag_0 } # Line1/Area0/Tag0 (Double)');
    expect(imported.slowestMs).toBeLessThan(HEALTHZ_BOUND_MS);

    const listData = json({ yaml: r.yaml });
    const listed = await whileHealthz(() => post('/console/api/config/mappings', listData));
    expect(listed.result.status).toBe(200);
    expect(listed.result.body.rows).toBe(20_001);
    expect(Object.keys(listed.result.body.mapped as object)).toHaveLength(20_001);
    expect(listed.slowestMs).toBeLessThan(HEALTHZ_BOUND_MS);
  }, 240_000);

  it('refuses a JSON body of 300,000 members before parsing it (its parse alone held the loop), naming the limit', async () => {
    const body = Object.fromEntries(Array.from({ length: 300_000 }, (_, i) => [`k${i}`, 1]));
    const data = json(body);
    const { result, slowestMs } = await whileHealthz(() => post('/console/api/config/check', data));
    expect(result.status).toBe(413);
    expect((result.body.error as { message: string }).message).toBe('the body holds more than 250,000 JSON values (members and list items), more than any request of the local API needs');
    expect(slowestMs).toBeLessThan(HEALTHZ_BOUND_MS);
  });

  it('refuses a 4 MB alias bomb posted as the editor\'s text, naming the limit, /healthz answered throughout', async () => {
    const parts = ['"a":&a ["x","x","x","x","x","x","x","x","x","x"]'];
    for (let l = 1; l < 9; l++) parts.push(`"${String.fromCharCode(97 + l)}":&${String.fromCharCode(97 + l)} {${Array.from({ length: 10 }, (_, i) => `"k${i}":*${String.fromCharCode(96 + l)}`).join(',')}}`);
    const yaml = `bomb: {${parts.join(', ')}}\npad: "${'x'.repeat(4_000_000)}"\n`;
    const data = json({ yaml });
    const { result, slowestMs } = await whileHealthz(() => post('/console/api/config/mappings', data));
    expect(result.status).toBe(400);
    expect(String((result.body.error as { message: string }).message)).toMatch(/aliases expand to more than 100,000 values \(an "alias bomb"\)/);
    expect(slowestMs).toBeLessThan(HEALTHZ_BOUND_MS);
  });
});
