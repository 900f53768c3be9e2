/**
 * Benchmark: reading a plant-sized configuration (issue 25). A gateway for 100,000 variables has a
 * 7–8 MB YAML file; reading it was the highest RSS of a whole 100k OPC UA run (565–677 MB) before
 * any source started.
 *
 * Each reading runs in a fresh node process (the gateway's V8 flags: --max-semi-space-size=2,
 * --heap-growing-percent=50) that reads the file, validates it and reports its peak RSS
 * (getrusage maxrss) and time:
 *   gateway   loadConfigFile (src/config/load.ts): the lean reader above 256 kB (yaml-lean.ts)
 *   baseline  the full reader (the `yaml` library's document, as before), then the same validation
 *
 * Target: the gateway's configuration read within the issue's 400 MB (and well below the baseline).
 *
 * Also, in this process: the console's Variables page shows a variable's entry as written in the
 * file (src/console/config-source.ts entryYaml). Baseline: parsing the whole file for it, as it
 * did for every file; now a plant-sized file's entry is found by its lines.
 *
 *   npm run build && npx tsx bench/config-load.ts
 *   BENCH_VARIABLES=30000 npx tsx bench/config-load.ts
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDocument, stringify } from 'yaml';
import { readFileSync } from 'node:fs';
import { entryYaml } from '../src/console/config-source.js';
import { envNumber, NOISY_MACHINE_NOTE, smokeBanner, table, verdict } from './lib.js';

// Smoke: 4,000 nodes (~0.4 MB), above the 256 kB from which the lean reader and the console's entry by lines apply.
const VARIABLES = envNumber('BENCH_VARIABLES', 100_000, 4_000);
const RUNS = envNumber('BENCH_RUNS', 3, 1);
smokeBanner(`BENCH_VARIABLES ${VARIABLES.toLocaleString('en-US')}, BENCH_RUNS ${RUNS}`);

const dir = mkdtempSync(join(tmpdir(), 'config-load-'));
const file = join(dir, 'gateway.yaml');
// The shape bench/opcua-recovery.ts and bench/plant-scale.ts write: one OPC UA server, a node a variable.
writeFileSync(
  file,
  stringify({
    gateway: { name: 'plant', data_dir: join(dir, 'data') },
    service: { base_url: 'http://127.0.0.1:9/tracking/v1', auth_url: 'http://127.0.0.1:9', organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' } },
    buffer: { path: join(dir, 'buffer.db') },
    opcua: {
      servers: [{ name: 'plant', endpoint: 'opc.tcp://127.0.0.1:4840', security_mode: 'None', publishing_interval: '1s', sampling_interval: '1s', nodes: Array.from({ length: VARIABLES }, (_, i) => ({ node_id: `ns=1;s=Plant.Line${i % 50}.Var${i + 1}`, variable: `mvr_opcua_${i + 1}` })) }],
    },
  }),
);

const dist = new URL('../dist/config/load.js', import.meta.url).href;
if (!existsSync(new URL(dist))) throw new Error('run `npm run build` first: the configuration is read by the compiled gateway (dist/config/load.js)');
const child = (mode: 'gateway' | 'baseline') => `
  import { readFileSync } from 'node:fs';
  import { setFlagsFromString } from 'node:v8';
  setFlagsFromString('--heap-growing-percent=50');
  const { loadConfigFile, parseYamlDocument, validateConfig } = await import(${JSON.stringify(dist)});
  const t0 = performance.now();
  const loaded = ${mode === 'gateway' ? `loadConfigFile(${JSON.stringify(file)})` : `validateConfig(parseYamlDocument(readFileSync(${JSON.stringify(file)}, 'utf8'), 'config').value)`};
  const ms = performance.now() - t0;
  const nodes = loaded.config.opcua.servers[0].nodes.length;
  console.log(JSON.stringify({ ms, peakRss: process.resourceUsage().maxRSS * 1024, nodes }));
`;

interface Reading {
  ms: number;
  peakRss: number;
  nodes: number;
}
const run = (mode: 'gateway' | 'baseline'): Reading =>
  JSON.parse(execFileSync(process.execPath, ['--max-semi-space-size=2', '--input-type=module', '-e', child(mode)], { encoding: 'utf8', env: { ...process.env, DEMO_SECRET: 'x' } })) as Reading;

const rows: Array<Record<string, string | number>> = [];
const best = { gateway: [] as Reading[], baseline: [] as Reading[] };
for (let i = 0; i < RUNS; i++) {
  for (const mode of ['gateway', 'baseline'] as const) {
    const r = run(mode);
    if (r.nodes !== VARIABLES) throw new Error(`${mode}: read ${r.nodes} nodes, wrote ${VARIABLES}`);
    best[mode].push(r);
    rows.push({ run: i + 1, reader: mode, 'time s': (r.ms / 1000).toFixed(2), 'peak RSS MB': Math.round(r.peakRss / 1e6) });
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const g = { ms: median(best.gateway.map((r) => r.ms)), rss: median(best.gateway.map((r) => r.peakRss)) };
const b = { ms: median(best.baseline.map((r) => r.ms)), rss: median(best.baseline.map((r) => r.peakRss)) };
const size = statSync(file).size;

// The console's entry for 20 variables across the file, against one whole-file parse.
const text = readFileSync(file, 'utf8');
const picks = Array.from({ length: 20 }, (_, k) => Math.floor(((k + 0.5) / 20) * VARIABLES));
const e0 = performance.now();
for (const i of picks) {
  const id = `mvr_opcua_${i + 1}`;
  const got = entryYaml(text, { id, settings: [`opcua.servers[0].nodes[${i}].variable`], config: null });
  if (!got?.includes(`variable: ${id}`)) throw new Error(`entry for ${id}: ${got}`);
}
const entryMs = (performance.now() - e0) / picks.length;
const p0 = performance.now();
parseDocument(text);
const parseMs = performance.now() - p0;
rmSync(dir, { recursive: true, force: true });

console.log(`\nconfiguration read: ${VARIABLES.toLocaleString('en-US')} OPC UA nodes, ${(size / 1e6).toFixed(1)} MB of YAML, ${RUNS} runs each; load average ${loadavg().map((l) => l.toFixed(1)).join(' / ')}`);
console.log(table(rows));
console.log(`median: gateway ${(g.ms / 1000).toFixed(2)} s, ${Math.round(g.rss / 1e6)} MB; baseline (full reader) ${(b.ms / 1000).toFixed(2)} s, ${Math.round(b.rss / 1e6)} MB`);
console.log(`ratio gateway / baseline: time ${(g.ms / b.ms).toFixed(2)}, peak RSS ${(g.rss / b.rss).toFixed(2)}`);
console.log(`console entry of one variable: ${entryMs.toFixed(1)} ms by lines (mean of ${picks.length}); baseline, the whole file parsed: ${(parseMs / 1000).toFixed(2)} s; ratio ${(entryMs / parseMs).toFixed(4)}`);
console.log(verdict(g.rss <= 400e6, `peak RSS while reading the configuration ${Math.round(g.rss / 1e6)} MB (target ≤ 400 MB, the issue's bound for the whole gateway)`));
console.log(NOISY_MACHINE_NOTE);
