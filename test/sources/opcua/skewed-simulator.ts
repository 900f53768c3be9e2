import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { Misbehaviour, MisbehaviourEvent } from '../../../src/sim/opcua-misbehaving.js';
import type { BulkStats, OpcuaSimulatorOptions, SimVariableName } from '../../../src/sim/opcua-server.js';
import { ROOT } from '../../helpers/cli.js';

export interface SkewedSimulator {
  endpointUrl: string;
  port: number;
  nodeIds: Record<SimVariableName, string>;
  /** Node ids of the bulk variables (option `bulkVariables`), in order. */
  bulkNodeIds: string[];
  /** The server's own counters (samplings, per-subscription notifications, overflows, queued Publish requests). */
  stats(): Promise<BulkStats>;
  /** The server certificate, made by node-opcua under the skewed clock (its notBefore is skewed too). */
  certificateFile: string;
  /** What the child's clock minus ours read at start-up (≈ the offset asked for). */
  measuredOffsetMs: number;
  /** Node ids of the rule-breaking nodes (option `misbehave`). */
  misbehavingNodeIds: Misbehaviour['nodeIds'];
  /** What the rule-breaking nodes were asked (option `misbehave` with `printEvents`), from the child's output. */
  events(): MisbehaviourEvent[];
  /** Everything the child printed, for failure messages. */
  output(): string;
  close(): Promise<void>;
}

const HERE = join(ROOT, 'test', 'sources', 'opcua');

/**
 * Starts src/sim/opcua-server.ts in a child process whose wall clock is `offsetMs` off ours (see
 * skewed-clock.mjs): a PLC with a wrong clock, while this process plays the gateway with the right
 * one. Options must be JSON (no callbacks).
 */
export function startSkewedSimulator(offsetMs: number, options: OpcuaSimulatorOptions = {}): Promise<SkewedSimulator> {
  const child = spawn(process.execPath, ['--import', join(HERE, 'skewed-clock.mjs'), '--import', 'tsx', join(HERE, 'skewed-simulator-main.ts')], {
    cwd: ROOT,
    env: { ...process.env, SKEWED_CLOCK_OFFSET_MS: String(offsetMs), SKEWED_SIM_OPTIONS: JSON.stringify(options) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  const statsWaiters: Array<(s: BulkStats) => void> = [];
  const output = () => out;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`the skewed simulator did not start within 90 s:\n${out}`)), 90_000);
    const fail = (err: Error) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(err);
    };
    child.on('error', fail);
    child.on('exit', (code) => fail(new Error(`the skewed simulator exited (${code}) before it was ready:\n${out}`)));
    child.stderr!.on('data', (d) => (out += d));
    child.stdout!.on('data', (d) => {
      out += d;
      // The whole line: with thousands of bulk node ids it comes in several chunks.
      const m = /^SKEWED_SIM_READY (.+)\n/m.exec(out);
      if (!m) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      child.stdout!.removeAllListeners('data');
      // Answers to `stats` (SIM_STATS lines), in the order asked.
      let pendingLine = '';
      child.stdout!.on('data', (more) => {
        out += more;
        pendingLine += more;
        let nl: number;
        while ((nl = pendingLine.indexOf('\n')) >= 0) {
          const line = pendingLine.slice(0, nl);
          pendingLine = pendingLine.slice(nl + 1);
          const m = /^SIM_STATS (.+)$/.exec(line);
          if (m) statsWaiters.shift()?.(JSON.parse(m[1]) as BulkStats);
        }
      });
      const ready = JSON.parse(m[1]) as Omit<SkewedSimulator, 'measuredOffsetMs' | 'output' | 'close' | 'events'> & { clockNow: number };
      resolve({
        endpointUrl: ready.endpointUrl,
        port: ready.port,
        nodeIds: ready.nodeIds,
        bulkNodeIds: ready.bulkNodeIds ?? [],
        stats: () =>
          new Promise<BulkStats>((resolveStats) => {
            statsWaiters.push(resolveStats);
            child.stdin!.write('stats\n');
          }),
        certificateFile: ready.certificateFile,
        measuredOffsetMs: ready.clockNow - Date.now(),
        misbehavingNodeIds: ready.misbehavingNodeIds ?? {},
        events: () => [...out.matchAll(/^SIM_EVENT (.+)$/gm)].map((e) => JSON.parse(e[1]) as MisbehaviourEvent),
        output,
        close: () => stopChild(child),
      });
    });
  });
}

/** The simulator in a child process with the real clock: a server whose work must not block this process (a 1,000,000-value answer). */
export function startSimulatorProcess(options: OpcuaSimulatorOptions = {}): Promise<SkewedSimulator> {
  return startSkewedSimulator(0, options);
}

/** Closes the child's stdin (its signal to shut the server down), SIGKILL after 10 s. */
function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.stdin!.end();
  });
}
