import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { startOpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { ROOT } from '../../helpers/cli.js';
import { waitFor } from '../../helpers/wait.js';
import { makeSource, tmpPki } from './helpers.js';

/**
 * Issue 12 §8: a killed gateway leaves its session on the server until it times out; a PLC with
 * few session slots then refuses the restarted gateway with BadTooManySessions. The source names
 * that status, keeps retrying with backoff, and connects once the orphan session has timed out.
 */

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanup.length) await Promise.resolve(cleanup.pop()!()).catch(() => undefined);
});

/** A client process that opens a session (timeout `timeoutMs`) and is then SIGKILLed: an orphan session. */
async function orphanSession(endpoint: string, timeoutMs: number): Promise<void> {
  const script = `
const { OPCUAClient } = require('node-opcua');
(async () => {
  const c = OPCUAClient.create({ endpointMustExist: false, requestedSessionTimeout: ${timeoutMs}, connectionStrategy: { maxRetry: 1 } });
  await c.connect(${JSON.stringify(endpoint)});
  await c.createSession();
  console.log('session');
})().catch((e) => { console.error(e.message); process.exit(1); });`;
  const child: ChildProcess = spawn(process.execPath, ['-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  cleanup.push(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  await waitFor(() => out.includes('session') || child.exitCode !== null, { timeoutMs: 60_000, what: 'orphan session created' });
  expect(out).toContain('session');
  child.kill('SIGKILL');
  await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r)));
}

describe('OPC UA server with no free session slot', () => {
  it('names BadTooManySessions, retries with backoff and connects once the orphan session timed out', async () => {
    const sim = await startOpcuaSimulator({ maxSessions: 1, updateIntervalMs: 100, securityModes: ['None'] });
    cleanup.push(() => sim.close());
    await orphanSession(sim.endpointUrl, 12_000);
    const killedAt = Date.now();

    const h = makeSource(
      { endpoint: sim.endpointUrl, security_mode: 'None', publishing_interval: 200, sampling_interval: 100, reconnect: { initial_delay: 500, max_delay: 3_000 }, nodes: [{ node_id: sim.nodeIds.temperature, variable: 'mvr_press1_temperature' }] },
      { pkiDir: tmpPki() },
    );
    cleanup.push(() => h.close());
    void h.source.start();

    const refused = await waitFor(() => h.log.lines.find((l) => l.code === 'OPCUA_TOO_MANY_SESSIONS'), { timeoutMs: 30_000, what: 'BadTooManySessions reported' });
    expect(String(refused.msg)).toMatch(/no free session slot \(BadTooManySessions\).*session_timeout.*keeps retrying with backoff/);
    expect(JSON.stringify(h.source.status().lastError)).toMatch(/OPCUA_TOO_MANY_SESSIONS/);

    // The orphan session times out on the server (12 s requested), then the source gets in.
    await waitFor(() => h.sink.of('mvr_press1_temperature').length >= 3, { timeoutMs: 90_000, what: 'samples after the orphan session timed out' });
    const connectedAfter = Date.now() - killedAt;
    const attempts = h.log.lines.filter((l) => l.code === 'OPCUA_TOO_MANY_SESSIONS').length;
    console.log(`connected ${(connectedAfter / 1000).toFixed(1)} s after the orphan client was killed; ${attempts} BadTooManySessions lines logged (throttled)`);
    expect(h.source.status().state).toBe('connected');
  }, 150_000);
});
