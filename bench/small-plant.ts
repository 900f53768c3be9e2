/**
 * A small plant over MQTT: what the gateway costs beside a bare subscriber at a modest load
 * (issue 37 §5: "small plants pay little"). BENCH_VARIABLES variables (default 1,000) each publish
 * one value a second as its own QoS 1 message (`{"timestamp": ms, "metrics": [{"name", "value"}]}`
 * on plant/small/<i>), spread over the second: 1,000 messages/s through mosquitto. Then, one after
 * the other, each in its own process:
 *
 *   bare (tsx)   an mqtt.js subscriber counting messages, started as bench/plant-scale.ts starts its
 *                bare clients (node with the tsx loader, which adds its own memory);
 *   bare (node)  the same subscriber in plain node, nothing loaded but mqtt.js;
 *   gateway      the compiled gateway, default settings, an MQTT source on plant/small/#, a durable
 *                buffer, the emulator upstream in its own process.
 *
 * Each warms up BENCH_WARMUP s (default 20) and is measured over BENCH_SECONDS (default 60): RSS
 * (/proc, peak and median), CPU (cores), messages received (the gateway: samples committed). The
 * ratios gateway / bare are the figures (target: RSS ≤ 1.3 × the bare subscriber's).
 *
 *   npm run build && npx tsx bench/small-plant.ts
 *
 * Env: BENCH_VARIABLES, BENCH_SECONDS, BENCH_WARMUP, BENCH_SIDES (bare-tsx,bare-node,gateway),
 * BENCH_GATEWAY_NODE_ARGS (flags for the gateway's node, diagnosis), BENCH_MEM_DETAIL=1 (the
 * gateway's /metrics memory figures, threads and largest mappings at the window's end),
 * BENCH_HEAP_SNAPSHOT=<dir> (a heap snapshot of the gateway at the window's end, written there).
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuSecondsOf, envList, envNumber, freePort, getJson, mb, MOSQUITTO, NOISY_MACHINE_NOTE, ratioText, requirePeer, ROOT, rssSampler, smokeBanner, startEmulatorProcess, startGatewayProcess, startMosquitto, table } from './lib.js';

const SELF = fileURLToPath(import.meta.url);
const VARIABLES = envNumber('BENCH_VARIABLES', 1_000, 100);
const SECONDS = envNumber('BENCH_SECONDS', 60, 2);
const WARMUP = envNumber('BENCH_WARMUP', 20, 1);
const SIDES = envList('BENCH_SIDES', 'bare-tsx,bare-node,gateway', 'bare-node,gateway');
const GATEWAY_NODE_ARGS = (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg().map((l) => l.toFixed(1)).join(' / ');
const variableOf = (i: number) => `mvr_small_${i + 1}`;

/** The publisher: every variable once a second, in ten slices, caught up by the clock when late. */
async function publisher(a: { url: string }): Promise<void> {
  const mqtt = (await import('mqtt')).default;
  const client = await mqtt.connectAsync(a.url, { clientId: `small-plant-pub-${process.pid}`, clean: true });
  let sent = 0;
  let done = 0;
  const t0 = performance.now();
  setInterval(() => {
    const due = Math.floor((performance.now() - t0) / 100);
    for (; done < due; done++) {
      const from = Math.floor((VARIABLES * (done % 10)) / 10);
      const to = Math.floor((VARIABLES * ((done % 10) + 1)) / 10);
      const ts = Date.now();
      for (let i = from; i < to; i++) {
        client.publish(`plant/small/${i}`, JSON.stringify({ timestamp: ts, metrics: [{ name: variableOf(i), value: (done % 1000) + i / 1e6 }] }), { qos: 1 });
        sent += 1;
      }
    }
  }, 20);
  process.on('message', (m) => {
    if (m === 'count') process.send?.({ count: sent });
  });
  process.send?.({ ready: true });
}

/** The bare subscriber's code, run by plain node (BENCH side bare-node) or as a role of this file (bare-tsx). */
const BARE_SOURCE = `
  const mqtt = (await import('mqtt')).default;
  const url = process.argv.at(-1);
  const client = await mqtt.connectAsync(url, { clientId: 'small-plant-bare-' + process.pid, clean: true });
  let messages = 0;
  client.on('message', () => void (messages += 1));
  await client.subscribeAsync('plant/small/#', { qos: 1 });
  process.on('message', (m) => { if (m === 'count') process.send({ count: messages }); });
  process.send({ ready: true });
`;

async function bareRole(a: { url: string }): Promise<void> {
  process.argv.push(a.url);
  await new Function(`return (async () => { ${BARE_SOURCE} })()`)();
}

function ask<T>(cp: ChildProcess, what: string, key: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const on = (m: unknown) => {
      if (typeof m === 'object' && m !== null && key in m) {
        cp.off('message', on);
        resolve(m as T);
      }
    };
    cp.on('message', on);
    cp.once('exit', (code) => reject(new Error(`child exited (${code})`)));
    if (what) cp.send(what);
  });
}

interface Figures {
  side: string;
  cores: number;
  rssPeak: number;
  rssMedian: number;
  rate: number;
  note: string;
}

async function measure(side: string, pid: number, count: () => Promise<number>, note: () => Promise<string> = async () => ''): Promise<Figures> {
  await sleep(WARMUP * 1_000);
  const rss = rssSampler(pid, 250);
  const c0 = cpuSecondsOf(pid);
  const n0 = await count();
  const t0 = performance.now();
  await sleep(SECONDS * 1_000);
  const s = (performance.now() - t0) / 1_000;
  const n1 = await count();
  const cores = (cpuSecondsOf(pid) - c0) / s;
  const { peak, samples } = rss.stop();
  const sorted = [...samples].sort((x, y) => x - y);
  return { side, cores, rssPeak: peak, rssMedian: sorted[Math.floor(sorted.length / 2)] ?? peak, rate: (n1 - n0) / s, note: await note() };
}

async function bare(side: 'bare-tsx' | 'bare-node', url: string): Promise<Figures> {
  const cp = side === 'bare-tsx' ? fork(SELF, ['bare'], { execArgv: process.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }) : spawn(process.execPath, ['--input-type=module', '-e', BARE_SOURCE, url], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  if (side === 'bare-tsx') cp.send({ url });
  await ask(cp, '', 'ready');
  try {
    return await measure(side, cp.pid!, async () => (await ask<{ count: number }>(cp, 'count', 'count')).count);
  } finally {
    cp.kill('SIGTERM');
  }
}

/** Threads of a process and their names (/proc/<pid>/task). */
function threadsOf(pid: number): string {
  try {
    const names = readdirSync(`/proc/${pid}/task`).map((t) => readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim());
    const by = new Map<string, number>();
    for (const n of names) by.set(n, (by.get(n) ?? 0) + 1);
    return `${names.length} threads (${[...by].map(([n, k]) => (k > 1 ? `${n} ×${k}` : n)).join(', ')})`;
  } catch {
    return '';
  }
}

/** The process's resident memory by mapping (/proc/<pid>/smaps), the largest first. */
function largestMappings(pid: number, top = 12): string {
  try {
    const by = new Map<string, number>();
    let name = '';
    for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
      const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
      if (head) name = head[1] || '[anonymous]';
      const rss = /^Rss:\s+(\d+) kB/.exec(line);
      if (rss) by.set(name, (by.get(name) ?? 0) + Number(rss[1]) * 1024);
    }
    return [...by].sort((a, b) => b[1] - a[1]).slice(0, top).map(([n, b]) => `    ${mb(b).toFixed(1).padStart(6)} MB  ${n}`).join('\n');
  } catch {
    return '';
  }
}

async function gateway(url: string, dir: string): Promise<Figures> {
  const { DEMO_FIXTURE } = await import('../src/emulator/demo-fixture.js');
  const fixture = { ...DEMO_FIXTURE, machine_variables: [...DEMO_FIXTURE.machine_variables, ...Array.from({ length: VARIABLES }, (_, i) => ({ id: variableOf(i), name: variableOf(i), machine: 'mch_gen1', unit: '' }))] };
  const emu = await startEmulatorProcess({ port: await freePort(), dir, fixture, jobDelayMs: 200 });
  const httpPort = await freePort();
  const base = `http://127.0.0.1:${httpPort}`;
  const snapshotDir = process.env.BENCH_HEAP_SNAPSHOT;
  const nodeArgs = [...GATEWAY_NODE_ARGS, ...(snapshotDir ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshotDir}`] : [])];
  const gw = await startGatewayProcess(
    {
      gateway: { name: 'small-plant', data_dir: join(dir, 'data'), status_interval: 0 },
      log: { level: 'info', format: 'json' },
      service: { base_url: `${emu.base}/tracking/v1`, auth_url: emu.base, organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' } },
      buffer: { path: join(dir, 'buffer.db') },
      http: { enabled: true, host: '127.0.0.1', port: httpPort },
      mqtt: { connections: [{ name: 'plant', url, client_id: 'small-plant-gw', subscriptions: [{ topic: 'plant/small/#', format: 'metrics', qos: 1, payload_variables: ['mvr_small_*'] }] }] },
    },
    dir,
    nodeArgs,
  );
  const pid = gw.child.pid!;
  try {
    return await measure('gateway', pid, async () => (await getJson<{ buffer: { committed_total: number } }>(`${base}/status`)).buffer.committed_total, async () => {
      if (snapshotDir) {
        gw.child.kill('SIGUSR2');
        await sleep(15_000);
      }
      if (process.env.BENCH_MEM_DETAIL !== '1') return threadsOf(pid);
      const text = await fetch(`${base}/metrics`).then((r) => r.text());
      const read = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
      return `${threadsOf(pid)}; heap total ${mb(read('gateway_process_nodejs_heap_size_total_bytes'))} MB, used ${mb(read('gateway_process_nodejs_heap_size_used_bytes'))} MB, external ${mb(read('gateway_process_nodejs_external_memory_bytes'))} MB\n${largestMappings(pid)}`;
    });
  } finally {
    await gw.stop();
    await emu.stop();
  }
}

async function main(): Promise<void> {
  const role = process.argv[2];
  if (role) {
    const a = await new Promise<{ url: string }>((r) => process.once('message', (m) => r(m as { url: string })));
    if (role === 'publisher') return publisher(a);
    if (role === 'bare') return bareRole(a);
    throw new Error(`unknown role ${role}`);
  }
  if (!existsSync(join(ROOT, 'dist', 'cli.js'))) throw new Error('run `npm run build` first: the gateway runs from dist/');
  requirePeer(existsSync(MOSQUITTO), `${MOSQUITTO} is missing: the messages go through a real mosquitto (apt-get install mosquitto)`);
  smokeBanner(`BENCH_VARIABLES ${VARIABLES}, BENCH_SECONDS ${SECONDS}, BENCH_WARMUP ${WARMUP}, sides ${SIDES.join(',')}`);
  console.log(`Small plant over MQTT: ${VARIABLES.toLocaleString('en-US')} variables, one QoS 1 message each per second (${VARIABLES.toLocaleString('en-US')} messages/s); ${WARMUP} s warm-up, ${SECONDS} s measured per side.\n`);
  const dir = mkdtempSync(join(tmpdir(), 'small-plant-'));
  const broker = await startMosquitto(dir);
  const pub = fork(SELF, ['publisher'], { execArgv: process.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  pub.send({ url: broker.url });
  await ask(pub, '', 'ready');
  const rows: Array<Record<string, string | number>> = [];
  const results = new Map<string, Figures>();
  try {
    for (const side of SIDES) {
      const before = load();
      const f = side === 'gateway' ? await gateway(broker.url, dir) : await bare(side as 'bare-tsx' | 'bare-node', broker.url);
      results.set(side, f);
      rows.push({ side, 'CPU cores': f.cores.toFixed(3), 'RSS peak / median MB': `${mb(f.rssPeak)} / ${mb(f.rssMedian)}`, 'messages /s (of sent)': `${Math.round(f.rate)} (${((f.rate / VARIABLES) * 100).toFixed(1)} %)`, load: `${before} → ${load()}` });
      console.log(table(rows.slice(-1)));
      if (f.note) console.log(`  ${f.note}`);
    }
    const g = results.get('gateway');
    for (const b of ['bare-tsx', 'bare-node']) {
      const x = results.get(b);
      if (!g || !x) continue;
      rows.push({ side: `ratio gateway / ${b}`, 'CPU cores': ratioText(g.cores, x.cores), 'RSS peak / median MB': `${ratioText(g.rssPeak, x.rssPeak)} / ${ratioText(g.rssMedian, x.rssMedian)}`, 'messages /s (of sent)': ratioText(g.rate, x.rate, 3), load: '' });
    }
    console.log(`\n${table(rows)}\n`);
    console.log('Target (issue 37 §5): gateway RSS ≤ 1.3 × the bare subscriber\'s at 1,000 messages/s.');
    console.log(NOISY_MACHINE_NOTE);
  } finally {
    pub.kill('SIGTERM');
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
