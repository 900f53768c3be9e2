import { afterEach, describe, expect, it } from 'vitest';
import { renderStatus } from '../../src/commands/status.js';
import { DEMO_FIXTURE, startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { statusLine } from '../../src/status/line.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startInterfaceService } from '../helpers/interface-service.js';
import { captureLines } from '../helpers/log.js';
import { CATALOG_REFRESH_MS, QUARANTINE_MS, SUSPECT_MS, UnknownVariables } from '../../src/uplink/unknown-variables.js';
import { holdsFor, waitFor } from '../helpers/wait.js';

/**
 * Refusals understood by structure, not wording (§7 gives a 400 only `{code, message}`). The
 * emulator words its refusals as another implementation may ("The request payload is invalid.",
 * fault refusal_wording terse); its fixture knows mvr_gen_1..20 and the generator maps 500, so 480
 * are unknown. Before: the gateway recognised none (it matched the emulator's own words), split
 * every batch item by item, spent its budget on 400s and said "ok" with 0 unknown variables.
 */
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

const KNOWN = new Set(DEMO_FIXTURE.machine_variables.map((v) => v.id));

describe('refusals understood by structure, whatever their words', () => {
  it('500 mapped, 480 unknown, terse refusals: the catalog judges the suspects, the known are delivered, nothing is split item by item again', async () => {
    const emu: EmulatorHandle = await startEmulator({ port: 0, faults: { refusal_wording: 'terse' } });
    cleanup.push(() => emu.close());
    const gw: TestGateway = await startTestGateway(emu, { generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: 500 }, interval: 1000 }] });
    cleanup.push(() => gw.destroy());

    const st = await waitFor(() => {
      const s = gw.handle.status();
      return s.uplink.unknown_variables.count === 480 ? s : null;
    }, { timeoutMs: 60_000, intervalMs: 100, what: '480 unknown variables identified from the catalog' });
    expect(st.uplink.unknown_variables.by_source).toEqual({ gen: 480 });
    expect(st.uplink.unknown_variables.catalog_read_at).not.toBeNull();
    for (const e of st.uplink.unknown_variables.examples) expect(KNOWN.has(e.variable)).toBe(false);

    // The known 20 are delivered, again and again.
    await waitFor(() => [...KNOWN].filter((v) => v.startsWith('mvr_gen_')).every((v) => (emu.valueCounts()[v] ?? 0) >= 3), { timeoutMs: 30_000, what: 'known variables delivered 3 times each' });
    for (const v of Object.keys(emu.valueCounts())) expect(KNOWN.has(v), `${v} stored upstream`).toBe(true);

    // Once judged, no request carries them: no further 400 over several rounds of samples.
    const refusedSoFar = emu.stats().requests['POST /machine-data/batch']?.['400'] ?? 0;
    expect(refusedSoFar).toBeLessThan(60);
    await holdsFor(() => (emu.stats().requests['POST /machine-data/batch']?.['400'] ?? 0) === refusedSoFar, { forMs: 5_000, intervalMs: 100, what: 'no more 400s' });
    const rows = gw.handle.buffer.setAsideStore.list({ limit: 2_000 });
    for (const r of rows) expect(r.reason).toMatch(/^unknown machine variable: /);

    // Set-aside samples are not ingest the uplink has to carry: about 20/s arrive to be delivered, not 500/s.
    const now = gw.handle.status();
    expect(now.delivery.ingest_per_s).toBeLessThan(100);
    expect(now.delivery.above_sync_capacity).toBe(false);
    expect(now.delivery.state).not.toBe('growing');

    // One vocabulary on every surface: not "ok" while 480 mapped variables go nowhere.
    const words = 'delivering 20 of 500 variables (480 unknown to the service)';
    expect(now.uplink.state).toMatchObject({ state: 'partial', ok: false, text: words, mapped_variables: 500, delivering_variables: 20, unknown_variables: 480 });
    expect(now.uplink.condition).toBe('ok');
    expect(statusLine(now)).toContain(`uplink ${words}`);
    expect(renderStatus(now)).toMatch(new RegExp(`^UPLINK\\n {2}${words.replace(/[()]/g, '\\$&')}$`, 'm'));
    const metrics = await gw.handle.metrics.registry.metrics();
    expect(metrics).toMatch(/gateway_uplink_status\{state="partial"\} 1/);
    expect(metrics).toMatch(/gateway_uplink_status\{state="delivering"\} 0/);
    expect(metrics).toMatch(/gateway_uplink_unknown_variables 480/);
  }, 120_000);

  it('a service that is not the emulator, wording its 400 as §7 does: 100 mapped, 95 unknown, found from the catalog and set aside', async () => {
    // Written from the interface alone (test/helpers/interface-service.ts): a batch with an item it
    // cannot take is refused whole, {code: "bad_request", message: "invalid payload or parameters"}.
    const known = ['mvr_gen_1', 'mvr_gen_2', 'mvr_gen_3', 'mvr_gen_4', 'mvr_gen_5'];
    const service = await startInterfaceService(known);
    cleanup.push(() => service.close());
    const gw: TestGateway = await startTestGateway(service, { generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: 100 }, interval: 500 }] });
    cleanup.push(() => gw.destroy());
    const refused = () => service.answers.get('POST /tracking/v1/machine-data/batch 400') ?? 0;

    const st = await waitFor(() => {
      const s = gw.handle.status();
      return s.uplink.unknown_variables.count === 95 ? s : null;
    }, { timeoutMs: 30_000, intervalMs: 100, what: '95 unknown variables identified from the catalog' });
    expect(st.uplink.unknown_variables.examples.every((e) => !known.includes(e.variable))).toBe(true);
    await waitFor(() => known.every((v) => (service.stored.get(v) ?? 0) >= 3), { timeoutMs: 20_000, what: 'the 5 known variables delivered 3 times each' });
    expect([...service.stored.keys()].sort()).toEqual([...known].sort());
    // Judged once: no request carries them any more, so no further 400.
    const after = refused();
    await holdsFor(() => refused() === after, { forMs: 3_000, intervalMs: 100, what: 'no more 400s' });
    expect(gw.handle.status().uplink.state).toMatchObject({ state: 'partial', ok: false, text: 'delivering 5 of 100 variables (95 unknown to the service)' });
    for (const r of gw.handle.buffer.setAsideStore.list({ limit: 500 })) expect(r.reason).toMatch(/^unknown machine variable: /);
  }, 90_000);

  it('the catalog judges a suspect: not listed is unknown, listed is cleared and its samples requeued, refused again and again is held for a while', async () => {
    let t = 1_000_000;
    const clock = { now: () => t, monotonic: () => t };
    let catalog: Set<string> | Error = new Set(['mvr_a', 'mvr_b']);
    let reads = 0;
    const cleared: string[][] = [];
    const { logger, lines } = captureLines();
    const countLines = () => lines.filter((l) => /unknown to the organisation's catalog/.test(String(l.msg))).map((l) => l.unknown_variables);
    const u = new UnknownVariables({
      clock,
      logger,
      readCatalog: async () => {
        reads++;
        if (catalog instanceof Error) throw catalog;
        return catalog;
      },
      onCleared: (v) => cleared.push(v),
    });
    // Refused alone, whatever the words: suspect at once, its samples held; the catalog is read.
    expect(u.refusedAlone('mvr_x', 'The request payload is invalid.')).toMatchObject({ via: 'suspect' });
    expect(u.refusedAlone('mvr_a', 'The request payload is invalid.')).toMatchObject({ via: 'suspect' });
    expect(u.lookup('mvr_x')).toMatchObject({ via: 'suspect' });
    await u.settled();
    expect(reads).toBe(1);
    // Not listed: unknown. Listed: cleared, and its held samples go back into the queue.
    expect(u.lookup('mvr_x')).toMatchObject({ via: 'catalog', message: 'The request payload is invalid.' });
    expect(u.lookup('mvr_a')).toBeUndefined();
    expect(cleared).toEqual([['mvr_a']]);
    // Any other variable the catalog does not list is unknown too, without a refusal.
    expect(u.lookup('mvr_never_sent')).toMatchObject({ via: 'catalog' });
    expect(u.snapshot()).toMatchObject({ count: 2, suspects: 0, quarantined: 0 });
    expect(countLines()).toEqual([1]);
    // A listed variable refused alone again: with a fresh catalog no suspicion and no read; the
    // third refusal within a minute holds it for 5 minutes (not item by item at full rate).
    expect(u.refusedAlone('mvr_a', 'The request payload is invalid.')).toBeUndefined();
    t += 1_000;
    expect(u.refusedAlone('mvr_a', 'The request payload is invalid.')).toMatchObject({ via: 'quarantine' });
    expect(reads).toBe(1);
    expect(u.lookup('mvr_a')).toMatchObject({ via: 'quarantine' });
    t += QUARANTINE_MS + 1;
    expect(u.lookup('mvr_a')).toBeUndefined();
    // The log says the count once a minute as it grows, not once and never again.
    u.tick();
    expect(countLines()).toEqual([1, 2]);
    u.tick();
    expect(countLines()).toEqual([1, 2]);
    // (tick() also read the catalog again: its refresh was due.)
    await u.settled();
    // The catalog cannot be read: a suspect stays held, then is tried again after a while.
    catalog = new Error('HTTP 503');
    t += CATALOG_REFRESH_MS;
    expect(u.refusedAlone('mvr_b', 'nope')).toMatchObject({ via: 'suspect' });
    await u.settled();
    expect(u.snapshot()).toMatchObject({ suspects: 1, catalog_error: expect.stringContaining('HTTP 503') });
    expect(u.lookup('mvr_b')).toMatchObject({ via: 'suspect' });
    t += SUSPECT_MS + 1;
    expect(u.lookup('mvr_b')).toBeUndefined();
  });
});
