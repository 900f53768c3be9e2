/**
 * Child-process entry of skewed-simulator.ts: runs the OPC UA simulator under the skewed clock of
 * skewed-clock.mjs. Options come as JSON in SKEWED_SIM_OPTIONS; once listening it prints one line
 * `SKEWED_SIM_READY {json}` on stdout (node-opcua may print its own lines around it). It stops
 * when its stdin closes (the parent died or closed it) or on SIGTERM.
 */
import { startOpcuaSimulator, type OpcuaSimulatorOptions } from '../../../src/sim/opcua-server.js';

const options = JSON.parse(process.env.SKEWED_SIM_OPTIONS ?? '{}') as OpcuaSimulatorOptions;
const sim = await startOpcuaSimulator(options);
process.stdout.write(
  `SKEWED_SIM_READY ${JSON.stringify({ endpointUrl: sim.endpointUrl, port: sim.port, nodeIds: sim.nodeIds, certificateFile: sim.certificateFile, misbehavingNodeIds: sim.misbehaviour?.nodeIds ?? {}, clockNow: Date.now() })}\n`,
);

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
