/**
 * Benchmark: files and request bodies that used to block the gateway's event loop for seconds or
 * crash it (configuration readers, the console's check, CSV import and mappings, alias bombs,
 * keys by the hundred thousand). Targets:
 *   - a 4 MB configuration or CSV checks in <= 2 s, with no event-loop turn > 100 ms in the gateway;
 *   - alias bombs of any size are refused in <= 1 s, by both YAML readers;
 *   - 300,000 top-level keys get a clear error, not a crash.
 *
 * Part 1 reads texts in this process (what `edge-gateway check` and `run` do at start). Baseline in
 * the same run: one plain js-yaml load of the same text (no checks, no validation), the least any
 * reader does; and, in a child process capped at BENCH_FORMER_CAP_S, the former full reader's
 * duplicate-key check (the yaml library's uniqueKeys, quadratic in a mapping's keys).
 *
 * Part 2 posts to a running gateway (in this process, its console on) over HTTP while /healthz is
 * asked every 20 ms: the request's time, the longest event-loop turn of the gateway
 * (monitorEventLoopDelay) and the slowest /healthz answer. Baseline in the same run: the same work
 * done on the main thread, as the routes did before the console's text worker (its longest turn
 * is the whole job).
 *
 *   npx tsx bench/hostile-inputs.ts
 *   BENCH_PART=1 npx tsx bench/hostile-inputs.ts     (readers only)
 *   BENCH_SMOKE=1 npx tsx bench/hostile-inputs.ts    (smallest sizes: shows that it runs)
 *
 * Sizes: BENCH_BYTES (4,000,000: the configuration and the largest bomb), BENCH_KEYS (300,000),
 * BENCH_CHECK_KEYS (30,000: the console's check), BENCH_ROWS (20,000 CSV rows), BENCH_IDLE_S (5).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get as httpGet, request as httpRequest } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { load } from 'js-yaml';
import { stringify } from 'yaml';
import { loadConfigFile, parseConfigText, parseYamlDocument } from '../src/config/load.js';
import { silentLogger } from '../src/core/logger.js';
import { LEAN_READER_MIN_CHARS } from '../src/config/yaml-lean.js';
import { runTextJob } from '../src/console/text-jobs.js';
import { startEmulator } from '../src/emulator/index.js';
import { startGateway } from '../src/runtime/gateway.js';
import { envNumber, NOISY_MACHINE_NOTE, smokeBanner, table, verdict } from './lib.js';

const PART = process.env.BENCH_PART ?? 'all';
const FORMER_CAP_S = envNumber('BENCH_FORMER_CAP_S', 30, 2);
const BYTES = envNumber('BENCH_BYTES', 4_000_000, 260_000);
const KEYS = envNumber('BENCH_KEYS', 300_000, 10_000);
const CHECK_KEYS = envNumber('BENCH_CHECK_KEYS', 30_000, 3_000);
const ROWS = envNumber('BENCH_ROWS', 20_000, 200);
const IDLE_S = envNumber('BENCH_IDLE_S', 5, 0.5);
smokeBanner(`BENCH_BYTES ${BYTES}, BENCH_KEYS ${KEYS}, BENCH_CHECK_KEYS ${CHECK_KEYS}, BENCH_ROWS ${ROWS}, BENCH_IDLE_S ${IDLE_S}`);
const sizeLabel = (b: number) => (b >= 1_000_000 ? `${b / 1_000_000} MB` : `${b / 1_000} kB`);
const ms = (t: number) => Math.round(t);

// --- Texts ---------------------------------------------------------------------------------------

function plantConfig(bytes: number, anchor = false): string {
  const nodes: Array<{ node_id: string; variable: string }> = [];
  let s = '';
  for (let i = 0; s.length < bytes; i++) {
    nodes.push({ node_id: `ns=1;s=Plant.Line${i % 50}.Var${i + 1}`, variable: `mvr_opcua_${i + 1}` });
    if (i % 1000 === 999) s = stringify({ nodes });
  }
  const text = stringify({
    gateway: { name: 'plant', data_dir: '/tmp/hostile-inputs' },
    service: { base_url: 'http://127.0.0.1:9/tracking/v1', auth_url: 'http://127.0.0.1:9', organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' } },
    opcua: { servers: [{ name: 'plant', endpoint: 'opc.tcp://127.0.0.1:4840', security_mode: 'None', nodes }] },
  });
  return anchor ? text.replace('  name: plant\n', '  name: &plant plant\n').replace('    - name: plant\n', '    - name: *plant\n') : text;
}

const keys = (n: number) => Array.from({ length: n }, (_, i) => `k${i.toString(36)}: ${i}`).join('\n');

function bomb(bytes: number, flow: boolean): string {
  const letter = (l: number) => String.fromCharCode(97 + l);
  let head: string;
  if (flow) {
    const parts = ['"a":&a ["x","x","x","x","x","x","x","x","x","x"]'];
    for (let l = 1; l < 9; l++) parts.push(`"${letter(l)}":&${letter(l)} {${Array.from({ length: 10 }, (_, i) => `"k${i}":*${letter(l - 1)}`).join(',')}}`);
    head = `bomb: {${parts.join(', ')}}\n`;
  } else {
    const lines = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let l = 1; l < 9; l++) lines.push(`${letter(l)}: &${letter(l)} [${Array(10).fill(`*${letter(l - 1)}`).join(', ')}]`);
    head = `${lines.join('\n')}\n`;
  }
  return `${head}pad: "${'x'.repeat(Math.max(0, bytes - head.length - 10))}"\n`;
}

function timed(fn: () => unknown): { ms: number; outcome: string } {
  const t = performance.now();
  let outcome: string;
  try {
    fn();
    outcome = 'read';
  } catch (err) {
    const m = err instanceof Error ? ((err as { problems?: string[] }).problems ?? [err.message]).at(-1)! : String(err);
    outcome = `refused: ${m.replace(/^config: /, '').slice(0, 70)}`;
  }
  return { ms: performance.now() - t, outcome };
}

/** The former duplicate-key check (uniqueKeys: true), in a child process stopped after FORMER_CAP_S. */
function formerUniqueKeys(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'hostile-former-'));
  const file = join(dir, 'text.yaml');
  writeFileSync(file, text);
  try {
    const out = execFileSync(process.execPath, ['-e', `const { parseDocument } = require('yaml'); const t = require('fs').readFileSync(${JSON.stringify(file)}, 'utf8'); const s = performance.now(); parseDocument(t, { uniqueKeys: true }); console.log(Math.round(performance.now() - s));`], { cwd: join(import.meta.dirname, '..'), timeout: FORMER_CAP_S * 1000, encoding: 'utf8' });
    return `${out.trim()} ms`;
  } catch {
    return `> ${FORMER_CAP_S} s (stopped)`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// --- Part 1: the readers -------------------------------------------------------------------------

function part1(): boolean {
  const rows: Array<Record<string, string | number>> = [];
  let ok = true;
  const row = (name: string, text: string, fn: () => unknown, targetMs: number | null, former = '') => {
    const base = performance.now();
    try {
      load(text);
    } catch {
      /* a bomb js-yaml expands lazily; a text it refuses */
    }
    const baseMs = performance.now() - base;
    const r = timed(fn);
    if (targetMs !== null) ok &&= r.ms <= targetMs;
    rows.push({ case: name, bytes: text.length, 'gateway ms': ms(r.ms), outcome: r.outcome, 'baseline js-yaml load ms': ms(baseMs), ratio: Number((r.ms / Math.max(1, baseMs)).toFixed(2)), former, target: targetMs === null ? '' : `<= ${targetMs} ms` });
  };
  const plain = plantConfig(BYTES);
  const anchored = plantConfig(BYTES, true);
  row(`${sizeLabel(BYTES)} configuration (${plain.length >= LEAN_READER_MIN_CHARS ? 'lean' : 'full'} reader), read + validated`, plain, () => parseConfigText(plain), 2_000);
  row(`${sizeLabel(BYTES)} configuration with an anchor (full reader)`, anchored, () => parseConfigText(anchored), null);
  const kCheck = keys(CHECK_KEYS);
  row(`${CHECK_KEYS.toLocaleString('en-US')} keys, full reader`, kCheck, () => parseYamlDocument(kCheck), 2_000, formerUniqueKeys(kCheck));
  const kMany = keys(KEYS);
  row(`${KEYS.toLocaleString('en-US')} keys, read + validated`, kMany, () => parseConfigText(kMany), 2_000);
  const bombSizes = [...new Set([1_000, Math.min(300_000, BYTES), BYTES])];
  for (const size of bombSizes) {
    const label = sizeLabel(size);
    for (const flow of [true, false]) {
      const text = bomb(size, flow);
      row(`alias bomb, ${flow ? 'flow' : 'block'}, ${label}: gateway reader`, text, () => parseConfigText(text), 1_000);
      row(`alias bomb, ${flow ? 'flow' : 'block'}, ${label}: full reader (console)`, text, () => parseYamlDocument(text), 1_000);
    }
  }
  console.log('Part 1: the configuration readers, in this process\n');
  console.log(table(rows));
  return ok;
}

// --- Part 2: the console over HTTP ---------------------------------------------------------------

/**
 * The client's side, in this process too: the body is encoded before the measurement and the
 * answer kept as its chunks (decoded after), so the client's own work is not counted as the
 * gateway's.
 */
function post(url: string, data: Buffer): Promise<{ status: number; chunks: Buffer[] }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': data.length } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, chunks }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

const encoded = (body: unknown) => Buffer.from(JSON.stringify(body));

function healthz(url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    httpGet(`${url}/healthz`, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve());
    }).on('error', reject);
  });
}

async function part2(): Promise<boolean> {
  const emu = await startEmulator({ port: 0 });
  const dir = mkdtempSync(join(tmpdir(), 'hostile-inputs-'));
  const file = join(dir, 'gateway.yaml');
  writeFileSync(
    file,
    stringify({
      gateway: { name: 'bench', data_dir: join(dir, 'data'), status_interval: 0 },
      log: { level: 'silent' },
      service: { base_url: emu.baseUrl, auth_url: emu.authUrl, organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' } },
      buffer: { path: join(dir, 'buffer.db') },
      http: { enabled: true, port: 0, max_body_bytes: 10_000_000, rate_limit_per_minute: 1_000_000 },
    }),
  );
  const gw = await startGateway(loadConfigFile(file).config, { configPath: file, logger: silentLogger() });
  const url = gw.httpUrl!;
  const seed = 'opcua:\n  servers:\n    - name: plc1\n      endpoint: opc.tcp://10.0.0.1:4840\n      nodes:\n        - { node_id: "ns=2;s=Seed", variable: mvr_seed }   # seed\n';
  const rows = ['kind,source,variable,node_id,comment'];
  for (let i = 0; i < ROWS; i++) rows.push(`opcua,plc1,mvr_line1_tag_${i},ns=2;s=Line1.Area${i % 40}.Tag${i},Line1/Area${i % 40}/Tag${i} (Double) from the tag list of line 1 ${'-'.repeat(80)}`);
  const csv = rows.join('\r\n');
  // Within the 256 KiB the console checks.
  const k30 = Array.from({ length: CHECK_KEYS }, (_, i) => `k${i.toString(36)}: 1`).join('\n');
  let imported = '';
  const cases: Array<{ name: string; bytes: number; route: string; body: () => unknown; job: () => Parameters<typeof runTextJob>[0]; keep?: (text: string) => void }> = [
    { name: `check: ${CHECK_KEYS.toLocaleString('en-US')} keys`, bytes: k30.length, route: '/console/api/config/check', body: () => ({ yaml: k30 }), job: () => ({ job: 'check', yaml: k30 }) },
    { name: `import: ${ROWS.toLocaleString('en-US')} OPC UA rows`, bytes: csv.length, route: '/console/api/config/import-csv', body: () => ({ yaml: seed, csv }), job: () => ({ job: 'import', yaml: seed, csv, update: false, catalog: null }), keep: (t) => (imported = (JSON.parse(t) as { yaml: string }).yaml) },
    { name: 'mappings of the imported text', bytes: 0, route: '/console/api/config/mappings', body: () => ({ yaml: imported }), job: () => ({ job: 'mappings', yaml: imported }) },
    { name: 'merge 3 nodes into the imported text', bytes: 0, route: '/console/api/config/merge', body: () => ({ yaml: imported, opcua: { server: { name: 'plc1', endpoint: 'opc.tcp://10.0.0.1:4840' }, nodes: [0, 1, 2].map((i) => ({ node_id: `ns=2;s=New${i}`, variable: `mvr_new_${i}` })) } }), job: () => ({ job: 'merge', request: { yaml: imported, opcua: { server: { name: 'plc1', endpoint: 'opc.tcp://10.0.0.1:4840' }, nodes: [0, 1, 2].map((i) => ({ node_id: `ns=2;s=New${i}`, variable: `mvr_new_${i}` })) } } }) },
  ];
  // The worker's first job loads its modules; warm it as a console's first check would.
  await post(`${url}/console/api/config/check`, encoded({ yaml: 'gateway: { name: x }\n' }));
  const out: Array<Record<string, string | number>> = [];
  let ok = true;
  // The machine's own stalls: the same measurement for IDLE_S without a request (a loaded machine
  // delays a runnable thread too; a turn of the gateway's loop is then longer than its work).
  {
    const h = monitorEventLoopDelay({ resolution: 1 });
    h.enable();
    let slowest = 0;
    const until = performance.now() + IDLE_S * 1_000;
    while (performance.now() < until) {
      const t = performance.now();
      await healthz(url);
      slowest = Math.max(slowest, performance.now() - t);
      await new Promise((r) => setTimeout(r, 20));
    }
    h.disable();
    out.push({ case: `idle: no request, ${IDLE_S} s (the machine)`, 'body bytes': 0, status: '', 'request ms': '', 'longest turn ms': ms(Math.max(0, h.max / 1e6 - 1)), 'slowest /healthz ms': ms(slowest), 'baseline: on the main thread, ms': '', 'turn / baseline': '', target: '' });
  }
  for (const c of cases) {
    const data = encoded(c.body());
    const h = monitorEventLoopDelay({ resolution: 1 });
    let slowest = 0;
    let running = true;
    const poller = (async () => {
      while (running) {
        const t = performance.now();
        await healthz(url);
        slowest = Math.max(slowest, performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await new Promise((r) => setTimeout(r, 50));
    h.enable();
    const t = performance.now();
    const r = await post(`${url}${c.route}`, data);
    const total = performance.now() - t;
    h.disable();
    running = false;
    await poller;
    c.keep?.(Buffer.concat(r.chunks).toString('utf8'));
    const turn = Math.max(0, h.max / 1e6 - 1);
    // Baseline: the same job on the main thread, as before the worker (its longest turn is all of it).
    const b = performance.now();
    await runTextJob(c.job());
    const inline = performance.now() - b;
    const bytes = c.bytes || (c.body() as { yaml: string }).yaml.length;
    ok &&= total <= 2_000 && turn <= 100;
    out.push({ case: c.name, 'body bytes': bytes, status: r.status, 'request ms': ms(total), 'longest turn ms': ms(turn), 'slowest /healthz ms': ms(slowest), 'baseline: on the main thread, ms': ms(inline), 'turn / baseline': Number((turn / Math.max(1, inline)).toFixed(3)), target: '<= 2,000 ms, turn <= 100 ms' });
  }
  await gw.close();
  await emu.close();
  rmSync(dir, { recursive: true, force: true });
  console.log('\nPart 2: the console over HTTP, the gateway in this process, /healthz asked every 20 ms\n');
  console.log(table(out));
  return ok;
}

console.log(`load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}\n`);
const ok1 = PART === '2' ? true : part1();
const ok2 = PART === '1' ? true : await part2();
console.log(`\n${verdict(ok1, `readers: ${sizeLabel(BYTES)} read in <= 2 s, bombs refused in <= 1 s, ${KEYS.toLocaleString('en-US')} keys a clear error`)}`);
if (PART !== '1') console.log(verdict(ok2, 'console: each request <= 2 s, no event-loop turn > 100 ms'));
console.log(NOISY_MACHINE_NOTE);
