import { spawn } from 'node:child_process';
import { ROOT } from '../helpers/cli.js';

/**
 * Publishes retained messages on the plant broker from a separate process (a stranger on the
 * broker), so that the work and memory of producing them never count against the gateway under
 * test, which runs in this process.
 */
export type RogueMessages =
  /** `count` fake budget announcements `<prefix>/<namePrefix><i>/budget` in `group`, each demanding `demand`. */
  | { kind: 'fake-peers'; prefix: string; namePrefix: string; group: string; count: number; demand: number; leaseMs: number }
  /** One message on `topic`: `json` with a padding field that brings it to about `bytes`. */
  | { kind: 'big'; topic: string; json: Record<string, unknown>; bytes: number }
  /** Literal payloads. */
  | { kind: 'raw'; messages: Array<{ topic: string; payload: string }> };

const SCRIPT = `
import mqtt from 'mqtt';
const [url, specText] = [process.env.ROGUE_URL, process.env.ROGUE_SPEC];
const spec = JSON.parse(specText);
const client = await mqtt.connectAsync(url, { reconnectPeriod: 0, clientId: 'rogue-' + process.pid });
const opts = { qos: 0, retain: true };
if (spec.kind === 'fake-peers') {
  for (let i = 0; i < spec.count; i++) {
    client.publish(spec.prefix + '/' + spec.namePrefix + i + '/budget', JSON.stringify({ group: spec.group, demand_per_min: spec.demand, lease_ms: spec.leaseMs }), opts);
    if (i % 1000 === 999) await new Promise((r) => setImmediate(r));
  }
} else if (spec.kind === 'big') {
  const head = JSON.stringify(spec.json).slice(0, -1);
  client.publish(spec.topic, Buffer.from(head + ',"pad":"' + 'x'.repeat(spec.bytes) + '"}'), opts);
} else {
  for (const m of spec.messages) client.publish(m.topic, m.payload, opts);
}
// QoS 1 on a topic of its own: the broker answers it after everything sent before (one TCP stream).
await client.publishAsync('rogue/done', 'x', { qos: 1 });
await client.endAsync();
`;

export function publishRetainedFromAnotherProcess(url: string, spec: RogueMessages): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', SCRIPT], { cwd: ROOT, env: { ...process.env, ROGUE_URL: url, ROGUE_SPEC: JSON.stringify(spec) }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`rogue publisher exited with ${code}: ${err}`));
    });
  });
}
