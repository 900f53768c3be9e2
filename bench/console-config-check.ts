/**
 * Benchmark: the console's dry-run check of a 60 kB configuration (POST /console/api/config/check,
 * src/console/config-check.ts), issue 21 §3. What it costs the gateway's event loop: the longest
 * block (perf_hooks monitorEventLoopDelay at 1 ms resolution, while the check runs) and the total
 * time, for a valid 60 kB configuration (one OPC UA server, ~700 nodes) and the same with a bad
 * variable id on every node (~700 problems, 100 reported). Baseline in the same run: one plain YAML
 * parse of the same text (`yaml` parseDocument), which blocks for its whole duration.
 * Target: no block longer than ~50 ms once warm.
 *
 *   npx tsx bench/console-config-check.ts
 *   BENCH_RUNS=30 npx tsx bench/console-config-check.ts
 *
 * Before issue 21 the check parsed the document again for every problem (lineOf): 15 kB with 157
 * problems took 1.7 s in one block, 60 kB with ~700 problems minutes; and building the OPC UA source
 * loaded node-opcua, a 1.3 s block the first time in a gateway without OPC UA.
 */
import { parseDocument } from 'yaml';
import { checkConfigText } from '../src/console/config-check.js';
import { envNumber, measureBlock, median, NOISY_MACHINE_NOTE, SMOKE, smokeBanner, table, verdict } from './lib.js';

const RUNS = envNumber('BENCH_RUNS', 15, 2);
const WARM_UP_RUNS = SMOKE ? 1 : 3;
smokeBanner(`BENCH_RUNS ${RUNS}`);
const TARGET_MS = 50;

function configText(bad: boolean, bytes = 60_000): string {
  let s = `service:
  base_url: http://127.0.0.1:18999/tracking/v1
  auth_url: http://127.0.0.1:18999
  organisation_id: org_demo
  auth: { mode: client_credentials, client_id: demo-gateway, client_secret: { file: /run/secrets/client_secret } }
opcua:
  servers:
    - name: plc1
      endpoint: opc.tcp://127.0.0.1:4840
      nodes:
`;
  for (let i = 0; s.length < bytes; i++) s += `        - { node_id: "ns=2;s=Line3.Press${i}.Temperature", variable: ${bad ? 'BAD' : 'mvr'}_press${i}_temperature }\n`;
  return s;
}

type Sample = Awaited<ReturnType<typeof measureBlock>>;
const max = (xs: number[]) => Math.max(...xs);

const valid = configText(false);
const invalid = configText(true);

const cases: Array<{ name: string; run: () => unknown }> = [
  { name: 'baseline: YAML parse (sync)', run: () => parseDocument(valid) },
  { name: 'check, valid 60 kB', run: () => checkConfigText(valid) },
  { name: 'check, 60 kB with every node bad', run: () => checkConfigText(invalid) },
];

const cold = await measureBlock(() => checkConfigText(valid));
const rows: Array<Record<string, string | number>> = [];
const results = new Map<string, Sample[]>();
for (const c of cases) {
  const samples: Sample[] = [];
  for (let i = 0; i < RUNS + WARM_UP_RUNS; i++) {
    const s = await measureBlock(c.run);
    if (i >= WARM_UP_RUNS) samples.push(s);
  }
  results.set(c.name, samples);
}
const base = results.get(cases[0].name)!;
const report = await checkConfigText(invalid);
for (const c of cases) {
  const s = results.get(c.name)!;
  rows.push({
    case: c.name,
    'total ms (median)': Number(median(s.map((x) => x.totalMs)).toFixed(1)),
    'longest block ms (median)': Number(median(s.map((x) => x.blockMs)).toFixed(1)),
    'longest block ms (max)': Number(max(s.map((x) => x.blockMs)).toFixed(1)),
    'ratio block / YAML parse': Number((median(s.map((x) => x.blockMs)) / median(base.map((x) => x.totalMs))).toFixed(2)),
  });
}

console.log(`Console dry-run check, ${valid.length.toLocaleString('en-US')} characters; ${RUNS} runs per case after ${WARM_UP_RUNS} warm-up runs`);
console.log(`Problems in the bad text: ${report.problems.length} reported + ${report.more_problems} more`);
console.log(`First check in this process (cold: JIT, first use of the schemas): total ${cold.totalMs.toFixed(0)} ms, longest block ${cold.blockMs.toFixed(0)} ms\n`);
console.log(table(rows));
const worst = Math.max(...cases.slice(1).map((c) => median(results.get(c.name)!.map((x) => x.blockMs))));
console.log(`\n${verdict(worst <= TARGET_MS, `longest event-loop block of a warm check (median) ${worst.toFixed(1)} ms <= ${TARGET_MS} ms`)}`);
console.log(NOISY_MACHINE_NOTE);
