import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { measureRates, progressBar, renderStatus, statusUrlFromConfig } from '../../src/commands/status.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import type { GatewayStatus } from '../../src/status/model.js';
import { ROOT, runCli } from '../helpers/cli.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const NOW = Date.parse('2025-03-04T10:15:00Z');

/** What /status says in the middle of a multi-day catch-up through import jobs, with every kind of source. */
function catchingUp(): GatewayStatus {
  return {
    gateway: { name: 'plant-a-line-3', version: '0.1.0', started_at: '2025-03-04T08:00:00.000Z', uptime_s: 8_100, pid: 4711, memory: { rss_bytes: 120e6, heap_used_bytes: 40e6, external_bytes: 5e6 } },
    sources: [
      {
        name: 'press1', kind: 'opcua', state: 'connected', since: NOW - 7_200_000, samplesRead: 1_234_567, samplesRefused: { bad_status: 12 }, lastSampleAt: NOW - 400, lastError: null,
        detail: { endpoint: 'opc.tcp://10.0.0.5:4840', security: 'SignAndEncrypt/Basic256Sha256', mode: 'subscription', nodes_configured: 12, nodes_monitored: 11, invalid_nodes: [{ node_id: 'ns=2;s=Nope', variable: 'mvr_press1_x', reason: 'BadNodeIdUnknown' }] },
      },
      {
        name: 'modbus', kind: 'modbus', state: 'degraded', since: NOW - 90_000, samplesRead: 400_000, samplesRefused: {}, lastSampleAt: NOW - 1_000,
        lastError: { code: 'MODBUS_TIMEOUT', message: 'mixer2 (tcp://10.0.0.7:502 unit 1) did not answer within 1000 ms', at: NOW - 30_000 },
        detail: { devices: [{ name: 'mixer1', state: 'connected' }, { name: 'mixer2', state: 'disconnected' }], connections: [] },
      },
      { name: 'packer', kind: 'mqtt', state: 'connected', since: NOW - 60_000, samplesRead: 5_000, samplesRefused: { not_numeric: 3 }, lastSampleAt: NOW - 2_000, lastError: null, detail: { url: 'mqtts://broker:8883', pending_messages: 2, unmatched_messages: 0, subscriptions: [{}, {}] } },
      { name: 'gen', kind: 'generator', state: 'stopped', since: NOW - 5_000, samplesRead: 0, samplesRefused: {}, lastSampleAt: null, lastError: null, detail: { variables: 20, interval_ms: 1000 } },
    ],
    buffer: {
      samples: 700_000, available: 100_000, inflight: 400, in_import_jobs: 599_600, pending_commit: 12, used_bytes: 84_000_000, disk_bytes: 85_500_000, free_bytes: 1_000_000, max_bytes: 2_000_000_000,
      oldest_unsent_age_s: 2.5 * 86_400, committed_total: 1_639_567, dropped_total: 0, writable: true, last_write_error: null, full_episode: null, recovered_from: null,
    },
    uplink: { condition: 'ok', reason: '', since: '2025-03-04T09:00:00.000Z', resume_in_ms: 0, budget_per_minute: 1_400, requests_last_minute: 1_310, freshest_delivered_age_s: 1.2, sync: { rate_per_s: 180.4, delivered_total: 600_000, inflight_batches: 4, set_aside_total: 3 } },
    backfill: {
      enabled: true, jobs_in_flight: 2, rate_per_s: 752.5, delivered_total: 300_000, set_aside_total: 0, failed_total: 1, sync_only_ranges: 0, backlog_at_start: 1_000_000, threshold_samples: 54_000,
      jobs: [
        { ledger_id: 7, state: 'submitted', items: 300_000, bytes: 9_600_000, job_id: 'job_01abc', attempts: 1, since: '2025-03-04T10:14:00.000Z' },
        { ledger_id: 8, state: 'building', items: null, bytes: null, job_id: null, attempts: 2, since: '2025-03-04T10:14:50.000Z' },
      ],
    },
    set_aside: { samples: 3 },
    backlog_eta_s: 750,
    annotations: {
      queued: 2, delivered: 40, refused: 1, oldest_queued_age_s: 95, open_downtimes: [{ machine: 'press1', started_at: '2025-03-04T10:10:00.000Z', reason: 'Tool change' }],
      last_refusal: { external_id: 'plant-a-line-3-x', message: 'machine_variables[0]: not at site', at: '2025-03-04T09:00:00.000Z' }, mqtt_trigger: { connected: false },
    },
    config: { path: '/etc/edge-gateway/gateway.yaml', loaded_at: '2025-03-04T08:00:00.000Z', reloads_applied: 1, reloads_refused: 1, last_reload: { at: '2025-03-04T09:30:00.000Z', outcome: 'refused', changed: [], restart_required: [], problems: ['uplink.batch_size: 250 is above the maximum of 200'] } },
    source_rates: { press1: 12, modbus: 40.25, packer: 0.5 },
  };
}

describe('status rendering', () => {
  it('shows sources with state and rate, buffer, both delivery paths, jobs, set-aside, outbox and a catch-up progress bar', () => {
    const text = renderStatus(catchingUp(), { now: NOW });
    expect(text).toContain('plant-a-line-3 0.1.0, up 2h15m (pid 4711), config /etc/edge-gateway/gateway.yaml');
    expect(text).toContain('last config reload REFUSED at 2025-03-04T09:30:00.000Z: uplink.batch_size: 250 is above the maximum of 200');
    // One row per source: name, kind, state with time in it, rate, read, refused, last sample.
    expect(text).toMatch(/^ {2}press1\s+opcua\s+connected 2h00m\s+12\/s\s+1,234,567\s+12\s+0\.4s ago$/m);
    expect(text).toMatch(/^ {2}modbus\s+modbus\s+degraded 2m\s+40\/s\s+400,000\s+0\s+1\.0s ago$/m);
    expect(text).toMatch(/^ {2}packer\s+mqtt\s+connected 60s\s+0\.5\/s\s+5,000\s+3\s+2\.0s ago$/m);
    // No rate measured for gen: a dash, not a made-up number.
    expect(text).toMatch(/^ {2}gen\s+generator\s+stopped 5s\s+-\s+0\s+0\s+never$/m);
    expect(text).toContain('11/12 nodes monitored, 1 INVALID (subscription, SignAndEncrypt/Basic256Sha256) at opc.tcp://10.0.0.5:4840');
    expect(text).toContain('1/2 devices up (mixer2 disconnected)');
    expect(text).toContain('last error 30.0s ago: MODBUS_TIMEOUT: mixer2 (tcp://10.0.0.7:502 unit 1) did not answer within 1000 ms');
    expect(text).toContain('refused: not_numeric 3');
    expect(text).toContain('unsent 700,000 samples, oldest 2d12h old; 84 MB in use of 2.0 GB, 86 MB on disk');
    expect(text).toContain('set aside 3 (edge-gateway set-aside list)');
    expect(text).toContain('sync    180/s, delivered 600,000, 4 batches in flight, freshest value 1.2s old');
    expect(text).toContain('import  753/s, delivered 300,000, 2 jobs in flight, failed 1');
    expect(text).toContain('#7 submitted job_01abc, 300,000 samples, 9.6 MB');
    expect(text).toContain('#8 building, attempt 2');
    expect(text).toContain(`catch-up ${progressBar(0.3)} 300,000 of 1,000,000 samples delivered, 700,000 left, ETA 13m`);
    expect(text).toContain('outbox 2 queued (oldest 2m), delivered 40, refused 1');
    expect(text).toContain('open downtimes: press1 since 2025-03-04T10:10:00.000Z (Tool change)');
    expect(text).toContain('MQTT trigger NOT connected');
    // The one-line summary closes the view.
    expect(text.trimEnd().split('\n').at(-1)).toMatch(/^sources 3\/4 up \| buffered 1,639,567 \| delivered 900,000 \| backlog 700,000/);
  });

  it('shows a plain backlog with its ETA outside a catch-up, and the problems that need an operator', () => {
    const s = catchingUp();
    s.backfill = { ...s.backfill, backlog_at_start: 0, jobs_in_flight: 0, jobs: [] };
    s.buffer = { ...s.buffer, samples: 1_200, writable: false, last_write_error: { code: 'SQLITE_FULL', message: 'database or disk is full', at: NOW } };
    s.backlog_eta_s = null;
    s.uplink = { ...s.uplink, condition: 'auth_failed', reason: 'the token service refused the client credentials (HTTP 401)', resume_in_ms: 240_000 };
    const text = renderStatus(s, { now: NOW });
    expect(text).not.toContain('catch-up');
    expect(text).toContain('backlog 1,200 samples, ETA unknown (the backlog is not shrinking at the current rates)');
    expect(text).toContain('NOT WRITABLE (SQLITE_FULL)');
    expect(text).toContain('auth_failed (the token service refused the client credentials (HTTP 401)), next attempt in 4m');
  });

  it('shows the uplink in the one vocabulary: what limits delivery, the pace under the budget, the found limit, the last outage and its catch-up', () => {
    const s = catchingUp();
    s.uplink = {
      ...s.uplink,
      state: { state: 'partial', text: 'delivering 20 of 5,000 variables (4,980 unknown to the service); rate limited (limit found: 88/min)', ok: false, mapped_variables: 5_000, delivering_variables: 20, unknown_variables: 4_980, suspect_variables: 0, refused_variables: 0, limit_found_per_minute: 88, since: null },
      pace_per_minute: 88,
      share_per_minute: 1_400,
      rate: { found_per_minute: 87.6, limit_seen_per_minute: 92, rate_limited_total: 5, last_rate_limited_at: '2025-03-04T10:14:00.000Z', paused_ms: 0 },
      outage: { state: 'over', since: '2025-03-04T10:00:00.000Z', until: '2025-03-04T10:01:00.000Z', caught_up_at: '2025-03-04T10:01:12.000Z', reason: 'no response (ECONNRESET)', backlog_peak: 61_234, oldest_age_peak_s: 61.5, backlog_at_return: 60_000, catch_up_s: 12 },
    };
    const text = renderStatus(s, { now: NOW });
    expect(text).toMatch(/^UPLINK\n {2}delivering 20 of 5,000 variables \(4,980 unknown to the service\); rate limited \(limit found: 88\/min\)$/m);
    expect(text).toContain('link    ok; 1,310 requests in the last minute, budget 1,400; pace 88/min (limit found 88/min, 5 × 429)');
    expect(text).toContain('outage  last: unreachable since 2025-03-04T10:00:00.000Z until 2025-03-04T10:01:00.000Z (60s): backlog up to 61,234, oldest 62s old; caught up 12s after');
    // The status line closes with the same words.
    expect(text.trimEnd().split('\n').at(-1)).toContain('uplink delivering 20 of 5,000 variables (4,980 unknown to the service); rate limited (limit found: 88/min)');
  });

  it('shows a source\'s last error while it is not connected or since it connected, without repeating the code', () => {
    const s = catchingUp();
    s.sources[2].lastError = { code: 'MQTT_UNREACHABLE', message: 'connect ECONNREFUSED 127.0.0.1:1883', at: s.sources[2].since - 5_000 };
    s.sources[3].lastError = { code: 'GEN_X', message: 'GEN_X: stopped by the operator', at: NOW - 1_000 };
    const text = renderStatus(s, { now: NOW });
    // packer reconnected after its error: not shown.
    expect(text).not.toContain('ECONNREFUSED');
    expect(text).toContain('last error 1.0s ago: GEN_X: stopped by the operator');
    expect(text).not.toContain('GEN_X: GEN_X');
  });

  it('shows a source\'s variables by quality, the counts that are not zero', () => {
    const s = catchingUp();
    s.sources[0].variables = { total: 12, good: 9, uncertain: 0, bad: 1, stale: 2, none: 0 };
    s.sources[1].variables = { total: 0, good: 0, uncertain: 0, bad: 0, stale: 0, none: 0 };
    const text = renderStatus(s, { now: NOW });
    expect(text).toContain(`    variables 12: 9 good, 2 stale, 1 bad`);
    expect(text.match(/variables \d/g)).toHaveLength(1);
  });

  it('progress bar clamps and rounds', () => {
    expect(progressBar(0, 10)).toBe('[..........] 0.0%');
    expect(progressBar(0.55, 10)).toBe('[######....] 55.0%');
    expect(progressBar(1.7, 10)).toBe('[##########] 100.0%');
  });

  it('measures source rates from two readings and skips a restarted gateway or a counter that went back', () => {
    const a = catchingUp();
    const b = catchingUp();
    b.sources[0].samplesRead += 240;
    b.sources[1].samplesRead -= 5;
    expect(measureRates({ status: a, at: 1_000 }, { status: b, at: 3_000 })).toEqual({ press1: 120, packer: 0, gen: 0 });
    const restarted = { ...b, gateway: { ...b.gateway, pid: 9 } };
    expect(measureRates({ status: a, at: 1_000 }, { status: restarted, at: 3_000 })).toEqual({});
  });
});

describe('the gateway address from a config file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-status-'));
  const file = (http: string) => {
    const f = join(dir, `${Math.random().toString(36).slice(2)}.yaml`);
    // A whole gateway config whose secret comes from a variable this shell does not have.
    writeFileSync(f, `service:\n  base_url: https://x.example/tracking/v1\n  organisation_id: org_a\n  auth: { mode: api_key, api_key: { env: NOT_SET_IN_THIS_SHELL } }\n${http}`);
    return f;
  };

  it('reads only http.host and http.port, so no secret is needed', () => {
    expect(statusUrlFromConfig(file(''))).toBe('http://127.0.0.1:8080');
    expect(statusUrlFromConfig(file('http: { host: 0.0.0.0, port: 9090 }\n'))).toBe('http://127.0.0.1:9090');
    expect(statusUrlFromConfig(file('http: { host: "::1", port: 9090 }\n'))).toBe('http://[::1]:9090');
  });

  it('says why it cannot ask', () => {
    expect(() => statusUrlFromConfig(file('http: { enabled: false }\n'))).toThrow(/http\.enabled is false in .*, so that gateway serves no \/status/);
    expect(() => statusUrlFromConfig(file('http: { port: 0 }\n'))).toThrow(/http\.port 0 in .* is not a fixed port to ask; give --url instead/);
    expect(() => statusUrlFromConfig(join(dir, 'missing.yaml'))).toThrow(/--config: .*missing\.yaml cannot be read \(ENOENT/);
  });
});

describe('edge-gateway status against a running gateway', () => {
  let emu: EmulatorHandle;
  let gw: TestGateway;

  beforeAll(async () => {
    emu = await startEmulator({ port: 0 });
    gw = await startTestGateway(emu, {
      generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: 5 }, interval: 100 }],
      http: { enabled: true, port: 0 },
    });
    await waitFor(() => gw.handle.sync.stats().deliveredTotal > 0, { what: 'first delivery' });
  });
  afterAll(async () => {
    await gw?.destroy();
    await emu?.close();
  });

  it('shows the view with measured source rates', async () => {
    const r = await runCli(['status', '--url', gw.handle.httpUrl!]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^test-gw \S+, up \S+ \(pid \d+\)/);
    // 5 variables every 100 ms: about 50 samples/s, measured over two readings.
    const row = /^ {2}gen\s+generator\s+connected \S+\s+([\d.,]+)\/s\s+[\d,]+\s+0\s+[\d.]+s ago$/m.exec(r.out);
    expect(row, r.out).not.toBeNull();
    const rate = Number(row![1].replace(/,/g, ''));
    expect(rate).toBeGreaterThan(10);
    expect(rate).toBeLessThan(200);
    expect(r.out).toContain('5 variables every 100 ms');
    expect(r.out).toMatch(/^UPLINK\n {2}delivering everything$/m);
    expect(r.out).toMatch(/^ {2}link {4}ok; \d+ requests in the last minute, budget 1,400; pace 1,400\/min$/m);
    expect(r.out).toMatch(/^ {2}sync\s+[\d.,]+\/s, delivered [\d,]+/m);
    expect(r.out).toMatch(/^sources 1\/1 up \| buffered/m);
    // Buffer v2: live rows, sealed chunks, bytes per sample and the capacity left.
    expect(r.out).toMatch(/^ {2}[\d,]+ live rows, [\d,]+ sealed in [\d,]+ chunks, [\d.-]+ bytes\/sample; capacity left /m);
  });

  it('--config finds the gateway from its configuration file without its secrets', async () => {
    const port = new URL(gw.handle.httpUrl!).port;
    const f = join(gw.dir, 'status.yaml');
    writeFileSync(f, `service:\n  base_url: ${emu.baseUrl}\n  organisation_id: org_demo\n  auth: { mode: client_credentials, client_id: demo-gateway }\nhttp: { port: ${port} }\n`);
    const r = await runCli(['status', '--config', f, '--json'], { env: { GATEWAY_CLIENT_SECRET: undefined, GATEWAY_CLIENT_SECRET_FILE: undefined } });
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).gateway.name).toBe('test-gw');
  });

  it('--json prints the /status document', async () => {
    const r = await runCli(['status', '--url', `${gw.handle.httpUrl}/`, '--json']);
    expect(r.code).toBe(0);
    const s = JSON.parse(r.out) as GatewayStatus;
    expect(s.gateway.name).toBe('test-gw');
    expect(s.sources.map((x) => x.name)).toEqual(['gen']);
    expect(s.buffer.writable).toBe(true);
  });

  it('--watch refreshes, and rates come from the previous reading', async () => {
    // Runs until two views are out (starting the CLI from the sources can take seconds on a busy
    // machine), then stops it: a fixed 4 s was too short under load.
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'status', '--url', gw.handle.httpUrl!, '--watch', '0.5'], { cwd: ROOT });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    try {
      await waitFor(() => out.split('SOURCES').length - 1 >= 2, { timeoutMs: 60_000, what: `two views (output so far: ${out.slice(-500)})` });
    } finally {
      child.kill('SIGKILL');
    }
    const second = out.slice(out.indexOf('SOURCES') + 1);
    expect(second).toMatch(/^ {2}gen\s+generator\s+connected \S+\s+[\d.,]+\/s/m);
  });

  it('says plainly when no gateway answers; exit 1', async () => {
    const r = await runCli(['status', '--url', 'http://127.0.0.1:1']);
    expect(r.code).toBe(1);
    expect(r.err).toContain('no gateway answers at http://127.0.0.1:1');
    expect(r.err).toContain('is http.enabled true?');
  });
});
