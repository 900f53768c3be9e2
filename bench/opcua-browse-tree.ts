/**
 * Benchmark: the console's OPC UA tree loaded on demand (issue 24 §3) against what the Build page
 * asked for before, on the simulator with 5,000 bulk variables (a mid-size PLC). The console's
 * browse code (console/build-tools.ts browseOpcua: one session per request, as the route runs it),
 * without HTTP.
 *
 * - baseline: the page's former first request, the whole tree to depth 4 with max_nodes 5,000, run
 *   by the same walk (it stops at the node limit inside the 5,000-variable folder);
 * - tree: the first request (the Objects folder's children, depth 1), expanding Press1, and
 *   expanding the 5,000-variable folder (one level, plus the look-ahead that says which can be
 *   expanded).
 * Time (median of BENCH_RUNS) and the size of the answer (JSON bytes).
 *
 *   npx tsx bench/opcua-browse-tree.ts
 *   BENCH_RUNS=9 npx tsx bench/opcua-browse-tree.ts
 *   BENCH_BULK=20000 npx tsx bench/opcua-browse-tree.ts       # a larger PLC (the former request's limit follows)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { browseOpcua, browseSchema } from '../src/console/build-tools.js';
import { startOpcuaSimulator } from '../src/sim/opcua-server.js';
import { envNumber, median, NOISY_MACHINE_NOTE, smokeBanner, table } from './lib.js';

const RUNS = envNumber('BENCH_RUNS', 5, 1);
/** Variables in the simulator's Bulk folder (BENCH_BULK; the former first request's node limit is the same). */
const BULK = envNumber('BENCH_BULK', 5_000, 500);
smokeBanner(`BENCH_RUNS ${RUNS}, BENCH_BULK ${BULK}`);
const dir = mkdtempSync(join(tmpdir(), 'bench-browse-tree-'));
const sim = await startOpcuaSimulator({ securityModes: ['None'], bulkVariables: BULK, pkiDir: join(dir, 'sim') });
const pki = join(dir, 'console-pki');

async function measure(label: string, body: Record<string, unknown>) {
  const input = browseSchema.parse({ endpoint: sim.endpointUrl, ...body });
  const times: number[] = [];
  let bytes = 0;
  let nodes = 0;
  let truncated = false;
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    const r = await browseOpcua(input, pki);
    times.push(performance.now() - t);
    bytes = JSON.stringify(r).length;
    nodes = r.nodes.length;
    truncated = r.truncated;
  }
  return { request: label, 'median ms': Math.round(median(times)), nodes, truncated: truncated ? 'yes' : 'no', 'answer kB': Math.round(bytes / 102.4) / 10 };
}

try {
  await browseOpcua(browseSchema.parse({ endpoint: sim.endpointUrl }), pki); // the console's certificate, made once
  const before = await measure(`before: whole tree, depth 4, max_nodes ${BULK}`, { depth: 4, max_nodes: BULK });
  const first = await measure('tree: Objects folder, depth 1', {});
  const press = await measure('tree: expand Press1', { root: 'nsu=urn:edge-gateway:sim:press1;s=Press1', path: 'Press1' });
  const bulk = await measure(`tree: expand Bulk (${BULK} variables)`, { root: 'nsu=urn:edge-gateway:sim:press1;s=Bulk', path: 'Bulk' });
  console.log(table([before, first, press, bulk]));
  console.log(`\nfirst answer of the tree: ${(first['median ms'] / before['median ms']).toFixed(3)} × the time, ${(first['answer kB'] / before['answer kB']).toFixed(4)} × the bytes of the former first request`);
  console.log(`expanding the ${BULK}-variable folder: ${(bulk['median ms'] / before['median ms']).toFixed(2)} × the former first request (which stopped at the node limit)`);
  console.log(`\n${NOISY_MACHINE_NOTE}`);
} finally {
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
}
