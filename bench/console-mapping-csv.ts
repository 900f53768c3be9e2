/**
 * Benchmark: the Build page's writes into the editor's text (issue 24 §3) on a 60 kB configuration
 * (one Modbus device with ~650 registers, flow style with comments, as config/demo.yaml writes
 * them): what each costs the gateway's event loop, the longest block (perf_hooks
 * monitorEventLoopDelay at 1 ms resolution) and the total time.
 *
 *   mappings   POST /console/api/config/mappings: the CSV export and the variables the text feeds
 *   merge      POST /console/api/config/merge: "Add to configuration" of 3 probed registers
 *   import     POST /console/api/config/import-csv: the text's own export (every row unchanged)
 *              plus 40 new rows for the device and 10 for a new one
 *
 * Each route parses the text in slices (config/load.ts parseYamlDocumentSliced) with a turn of the
 * event loop between them and between its steps. Baseline in the same run: one plain YAML parse of
 * the same text (`yaml` parseDocument), which blocks for its whole duration (the merge did that
 * twice per request before: parse, then read the result back). Target: no block longer than
 * ~50 ms, as the console's check (bench/console-config-check.ts).
 *
 *   npx tsx bench/console-mapping-csv.ts
 *   BENCH_RUNS=30 npx tsx bench/console-mapping-csv.ts
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Document, parseDocument } from 'yaml';
import { parseYamlDocumentSliced } from '../src/config/load.js';
import { ConfigMerge, fedVariables } from '../src/console/config-merge.js';
import { mappingsCsvOf } from '../src/console/mapping-csv.js';
import { importMappingsCsv } from '../src/console/mapping-import.js';
import { envNumber, measureBlock, median, NOISY_MACHINE_NOTE, SMOKE, smokeBanner, table, verdict } from './lib.js';

const RUNS = envNumber('BENCH_RUNS', 15, 2);
const WARM_UP_RUNS = SMOKE ? 1 : 3;
smokeBanner(`BENCH_RUNS ${RUNS}`);
const pause = (): Promise<void> => nextTurn().then(() => undefined);
const TARGET_MS = 50;

function configText(bytes = 60_000): string {
  let s = `service:
  base_url: http://127.0.0.1:18999/tracking/v1
  auth_url: http://127.0.0.1:18999
  organisation_id: org_demo
  auth: { mode: client_credentials, client_id: demo-gateway, client_secret: { file: /run/secrets/client_secret } }
modbus:
  devices:
    - name: line3
      host: 10.0.3.21
      registers:
`;
  for (let i = 0; s.length < bytes; i++) s += `        - { variable: mvr_line3_value${i}, table: holding, address: ${i * 2}, type: float32 }   # sensor ${i}\n`;
  return s;
}

type Sample = Awaited<ReturnType<typeof measureBlock>>;
const max = (xs: number[]) => Math.max(...xs);

const text = configText();
const registers = text.split('\n').filter((l) => l.includes('variable:')).length;
const exported = mappingsCsvOf(parseDocument(text)).csv;
const added = [
  ...Array.from({ length: 40 }, (_, i) => `modbus,line3,mvr_line3_new${i},,input,${i},int16,,,0.1,,new ${i},,,,,,,,,,`),
  ...Array.from({ length: 10 }, (_, i) => `modbus,line4,mvr_line4_v${i},,holding,${i * 2},float32,,CDAB,,,,,,tcp,10.0.3.22,502,,1,,,`),
].join('\r\n');
const csv = `${exported}${added}\r\n`;
const device = { name: 'line3', transport: 'tcp' as const, host: '10.0.3.21', port: 502, unit_id: 1 };

const cases: Array<{ name: string; run: () => unknown }> = [
  { name: 'baseline: YAML parse (sync)', run: () => parseDocument(text) },
  {
    // The route's steps (mapping-routes.ts).
    name: 'mappings (export + fed variables)',
    run: async () => {
      const parsed = await parseYamlDocumentSliced(text, 'bench', pause);
      const doc = parsed.doc ?? new Document();
      const out = mappingsCsvOf(doc, parsed.value);
      await pause();
      return [out, fedVariables(doc, parsed.value)];
    },
  },
  {
    // The route's steps (build-routes.ts).
    name: 'merge: 3 registers',
    run: async () => {
      const merge = await ConfigMerge.open(text, pause);
      merge.modbus(device, [0, 1, 2].map((i) => ({ variable: `mvr_line3_probe${i}`, table: 'input' as const, address: 100 + i, type: 'int16' })));
      return merge.resultSliced(pause);
    },
  },
  { name: `import: ${registers} unchanged + 50 new rows`, run: () => importMappingsCsv(text, csv, pause) },
];

const check = await importMappingsCsv(text, csv);
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

console.log(`Build page writes on a ${text.length.toLocaleString('en-US')}-character configuration (${registers} registers); ${RUNS} runs per case after ${WARM_UP_RUNS} warm-up runs`);
console.log(`Import check: ${check.added} added, ${check.unchanged} unchanged, ${check.problems.length} problems\n`);
console.log(table(rows));
const worst = Math.max(...cases.slice(1).map((c) => median(results.get(c.name)!.map((x) => x.blockMs))));
console.log(`\n${verdict(worst <= TARGET_MS, `longest event-loop block (median) ${worst.toFixed(1)} ms <= ${TARGET_MS} ms`)}`);
console.log(NOISY_MACHINE_NOTE);
