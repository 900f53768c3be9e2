import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetRow } from '../../src/fleet/view.js';
import { runCli } from '../helpers/cli.js';
import { connectClient, endClient, startAedes, type TestAedes } from '../sources/mqtt/helpers.js';

/**
 * Issue 21 §5: one malformed status document on the plant broker (`"uplink": 5`, `down_names: "x"`)
 * made `edge-gateway fleet --once` throw and then hang (the broker connection kept the process
 * alive). Every document is now checked against a schema: a bad one is shown as a bad row naming
 * the field and the value, the others as usual, and the command always exits. Real broker (aedes),
 * the CLI as its own process.
 */
const PREFIX = 'site/fleet';
const at = new Date().toISOString();
const good = { v: 1, gateway: 'good-1', state: 'online', at, version: '0.1.0', interval_s: 10, uplink: 'ok', sources: { up: 2, down: 0, down_names: [] }, backlog: 12, last_error: null };
// A gateway of an older version: no instance id and none of the newer fields.
const old = { v: 1, gateway: 'old-1', state: 'online', at, version: '0.0.9', interval_s: 10, uplink: 'ok', sources: { up: 1, down: 0, down_names: [] }, backlog: 3, oldest_unsent_age_s: null, eta_s: null, capacity_left_bytes: null, last_error: null, budget: null };
const bad = { ...good, gateway: 'bad-1', uplink: 5, sources: { up: 1, down: 1, down_names: 'x' } };

let broker: TestAedes;

beforeAll(async () => {
  broker = await startAedes();
  const c = await connectClient(broker.url);
  for (const [name, doc] of [['good-1', good], ['old-1', old], ['bad-1', bad]] as const) await c.publishAsync(`${PREFIX}/${name}/status`, JSON.stringify(doc), { qos: 1, retain: true });
  await c.publishAsync(`${PREFIX}/junk-1/status`, 'not json at all', { qos: 1, retain: true });
  await endClient(c);
});

afterAll(async () => {
  await broker?.close();
});

describe('edge-gateway fleet with a malformed status document on the broker', () => {
  it('--once prints every row, the bad ones as bad rows naming the field, and exits', async () => {
    const r = await runCli(['fleet', '--broker', broker.url, '--prefix', PREFIX, '--once', '--wait', '1'], { timeoutMs: 40_000 });
    expect(r.code, `exit code (null: killed after 40 s, it hung). stderr: ${r.err}`).toBe(0);
    expect(r.out).toMatch(/^good-1\s+online\s+ok\s+2 up/m);
    expect(r.out).toMatch(/^old-1\s+online\s+ok\s+1 up/m);
    expect(r.out).toMatch(/^bad-1\s+invalid\s.*uplink: 5 is not a string/m);
    expect(r.out).toMatch(/^junk-1\s+invalid\s.*not JSON/m);
    expect(r.out).toContain('4 gateways, 2 online');
  }, 60_000);

  it('--json gives the bad rows with the problem, and exits', async () => {
    const r = await runCli(['fleet', '--broker', broker.url, '--prefix', PREFIX, '--json', '--wait', '1'], { timeoutMs: 40_000 });
    expect(r.code, `exit code (null: killed after 40 s, it hung). stderr: ${r.err}`).toBe(0);
    const rows = JSON.parse(r.out) as FleetRow[];
    const bad1 = rows.find((x) => x.gateway === 'bad-1')!;
    expect(bad1.state).toBe('invalid');
    expect(bad1.problem).toMatch(/uplink: 5 is not a string/);
    expect(bad1.problem).toMatch(/sources\.down_names: "x" is not a list/);
    expect(bad1.sources_down_names).toEqual([]);
    expect(rows.find((x) => x.gateway === 'good-1')).toMatchObject({ state: 'online', uplink: 'ok', backlog: 12, problem: null });
    expect(rows.find((x) => x.gateway === 'old-1')).toMatchObject({ state: 'online', version: '0.0.9', backlog: 3, problem: null });
  }, 60_000);
});
