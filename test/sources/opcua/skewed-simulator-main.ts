/**
 * Child-process entry of skewed-simulator.ts: runs the OPC UA simulator under the skewed clock of
 * skewed-clock.mjs. Options come as JSON in SKEWED_SIM_OPTIONS; once listening it prints one line
 * `SKEWED_SIM_READY {json}` on stdout (node-opcua may print its own lines around it). A line
 * `stats` on stdin is answered with `SIM_STATS {json}` (the simulator's bulkStats()). It stops
 * when its stdin closes (the parent died or closed it) or on SIGTERM.
 */
import { startOpcuaSimulator, type OpcuaSimulatorOptions } from '../../../src/sim/opcua-server.js';

const options = JSON.parse(process.env.SKEWED_SIM_OPTIONS ?? '{}') as OpcuaSimulatorOptions;
const sim = await startOpcuaSimulator(options);
const bulkNodeIds = Array.from({ length: options.bulkVariables ?? 0 }, (_, i) => sim.bulkNodeId(i + 1));
process.stdout.write(
  `SKEWED_SIM_READY ${JSON.stringify({ endpointUrl: sim.endpointUrl, port: sim.port, nodeIds: sim.nodeIds, bulkNodeIds, certificateFile: sim.certificateFile, misbehavingNodeIds: sim.misbehaviour?.nodeIds ?? {}, clockNow: Date.now() })}\n`,
);
let input = '';
process.stdin.on('data', (d) => {
  input += d;
  let nl: number;
  while ((nl = input.indexOf('\n')) >= 0) {
    const line = input.slice(0, nl).trim();
    input = input.slice(nl + 1);
    if (line === 'stats') process.stdout.write(`SIM_STATS ${JSON.stringify(sim.bulkStats())}\n`);
  }
});

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  void sim.close().finally(() => process.exit(0));
};
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
