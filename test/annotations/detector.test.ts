import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AnnotationsRuntime } from '../../src/annotations/index.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { call, startHarness, waitFor } from './helpers.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function emulator(): Promise<EmulatorHandle> {
  const emu = await startEmulator({ port: 0 });
  cleanup.push(() => emu.close());
  return emu;
}

const RULES = {
  detectors: [
    { machine: 'press1', variable: 'mvr_press1_state', condition: '== 0', min_duration: '60s' },
    { machine: 'mixer1', variable: 'mvr_mixer1_running', condition: '< 1', min_duration: '10s', text: 'Mixer stopped (detected)', machine_variables: ['mvr_mixer1_running', 'mvr_mixer1_speed'] },
  ],
};

/** Feeds samples the way the sources' tapped sink does after a commit. */
function feed(rt: AnnotationsRuntime, variable: string, points: Array<[number, number]>): void {
  rt.onSamples(points.map(([ts, value]) => ({ variable, ts, value })));
}

const iso = (ms: number) => new Date(ms).toISOString();

describe('downtime detection from a state variable', () => {
  it('turns a long enough stop into a range annotation with the rule\'s text and variables; ignores short stops and late samples', async () => {
    const emu = await emulator();
    const h = await startHarness({ emu, annotations: RULES });
    cleanup.push(() => h.close());
    const rt = h.gw.handle.annotations!;
    const t0 = Date.parse('2026-03-01T06:00:00.000Z');

    feed(rt, 'mvr_press1_state', [[t0, 1], [t0 + 10_000, 0], [t0 + 20_000, 0], [t0 + 5_000, 1] /* late: ignored */, [t0 + 40_000, 2], [t0 + 80_000, 1]]);
    // press1: == 0 from +10 s until +40 s (the 2 at +40 s ends it): 30 s, shorter than 60 s: ignored.
    feed(rt, 'mvr_press1_state', [[t0 + 100_000, 0], [t0 + 130_000, 0], [t0 + 190_500, 1]]);
    // mixer1: < 1 from +0 s to +12 s: 12 s >= 10 s.
    feed(rt, 'mvr_mixer1_running', [[t0, 0], [t0 + 6_000, 0], [t0 + 12_000, 1], [t0 + 13_000, 0], [t0 + 14_000, 1]]);

    await waitFor(() => emu.annotations().length === 2, { what: 'two detected downtimes' });
    // Everything the detector made is in the outbox at once (onSamples is synchronous): two, both delivered, nothing else.
    await waitFor(() => rt.store.counts().delivered === 2, { what: 'both marked delivered' });
    expect(rt.store.counts()).toMatchObject({ queued: 0, delivered: 2, refused: 0 });
    const got = emu.annotations().sort((a, b) => a.started_at!.localeCompare(b.started_at!));
    expect(got).toHaveLength(2);
    expect(got[0]).toMatchObject({
      type: 'range',
      started_at: iso(t0),
      ended_at: iso(t0 + 12_000),
      text: 'Mixer stopped (detected)',
      machine_variables: [{ id: 'mvr_mixer1_running' }, { id: 'mvr_mixer1_speed' }],
    });
    expect(got[1]).toMatchObject({
      type: 'range',
      started_at: iso(t0 + 100_000),
      ended_at: iso(t0 + 190_500),
      text: 'Downtime detected: mvr_press1_state == 0 for at least 1 min',
      machine_variables: [{ id: 'mvr_press1_state' }, { id: 'mvr_press1_speed' }],
    });
    expect(got.every((a) => a.external_id!.startsWith('test-gw-auto-'))).toBe(true);
    const list = await call(h.url, 'GET', '/api/annotations?machine=press1');
    expect(list.body.annotations[0]).toMatchObject({ origin: 'detector', machine: 'press1' });
    const status = h.gw.handle.status().annotations as { detectors: Array<Record<string, unknown>> };
    expect(status.detectors[0]).toMatchObject({ machine: 'press1', state: 'idle', episodes: 1, ignored_short: 1 });
    expect(status.detectors[1]).toMatchObject({ machine: 'mixer1', episodes: 1, ignored_short: 1 });
  });

  it('shows an episode in progress on the panel and keeps it across a restart of the gateway', async () => {
    const emu = await emulator();
    const dir = mkdtempSync(join(tmpdir(), 'gw-detector-'));
    cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
    const a = await startHarness({ emu, dir, annotations: RULES });
    const since = Date.now() - 70_000; // down for 70 s already: past the 60 s minimum
    feed(a.gw.handle.annotations!, 'mvr_press1_state', [[since - 1_000, 1], [since, 0], [since + 30_000, 0]]);
    const panel = await call(a.url, 'GET', '/api/panel');
    expect(panel.body.machines[0].detected).toEqual([expect.objectContaining({ since, open: true, condition: '== 0' })]);
    // What the machine's signal says, in words (no states configured: Stopped / Running); mixer1 has seen nothing.
    expect(panel.body.machines[0].state).toEqual({ words: 'Stopped', down: true, value: 0, at: since + 30_000, since, recorded: true, min_duration_ms: 60_000 });
    expect(panel.body.machines[1].state).toBeNull();
    expect(a.gw.handle.status().annotations).toMatchObject({ detectors: [expect.objectContaining({ state: 'down', since: iso(since) }), expect.anything()] });
    await a.gw.close();
    expect(emu.annotations()).toHaveLength(0);

    const b = await startHarness({ emu, dir, annotations: RULES });
    cleanup.push(() => b.gw.close());
    expect(b.gw.handle.status().annotations).toMatchObject({ detectors: [expect.objectContaining({ state: 'down', since: iso(since) }), expect.anything()] });
    const end = since + 75_000;
    feed(b.gw.handle.annotations!, 'mvr_press1_state', [[since + 60_000, 0], [end, 1]]);
    await waitFor(() => emu.annotations().length === 1);
    expect(emu.annotations()[0]).toMatchObject({ type: 'range', started_at: iso(since), ended_at: iso(end) });
  });

  it('discards an episode of a rule that was removed from the config while the gateway was stopped', async () => {
    const emu = await emulator();
    const dir = mkdtempSync(join(tmpdir(), 'gw-detector-'));
    cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
    const a = await startHarness({ emu, dir, annotations: RULES });
    feed(a.gw.handle.annotations!, 'mvr_press1_state', [[Date.now() - 100_000, 0]]);
    await a.gw.close();
    const b = await startHarness({ emu, dir, annotations: { detectors: [{ ...RULES.detectors[0], condition: '!= 1' }] } });
    cleanup.push(() => b.gw.close());
    expect(b.gw.handle.annotations!.store.downtimes()).toEqual([]);
    feed(b.gw.handle.annotations!, 'mvr_press1_state', [[Date.now(), 1]]);
    // The detector writes to the outbox inside onSamples: had it closed the old episode, the annotation would be there now.
    expect(b.gw.handle.annotations!.store.counts()).toMatchObject({ queued: 0, delivered: 0, refused: 0 });
    expect(emu.annotations()).toHaveLength(0);
  });

  it('sees samples through the sources\' tapped sink: a generator\'s square wave becomes ranges matching the stored samples', async () => {
    const emu = await emulator();
    const h = await startHarness({
      emu,
      annotations: { detectors: [{ machine: 'press1', variable: 'mvr_press1_state', condition: '== 0', min_duration: 100, text: 'Press stopped' }] },
      // 'square' holds each level for 10 ticks: 0 for about 300 ms, then 1 for about 300 ms.
      sections: { generator: [{ name: 'state', variables: ['mvr_press1_state'], interval: 30, shape: 'square' }] },
    });
    cleanup.push(() => h.close());
    await waitFor(() => emu.annotations().length >= 3, { timeoutMs: 20_000, what: 'three detected downtimes' });
    await h.gw.handle.sources[0].close();
    await waitFor(() => h.gw.handle.buffer.stats().rows === 0, { what: 'samples delivered' });
    const values = new Map(emu.values('mvr_press1_state').map((v) => [Date.parse(v.timestamp), v.value]));
    const ranges = emu.annotations();
    let previousEnd = 0;
    for (const r of ranges) {
      const start = Date.parse(r.started_at!);
      const end = Date.parse(r.ended_at!);
      expect(r.text).toBe('Press stopped');
      expect(values.get(start)).toBe(0); // begins at the first 0 sample
      expect(values.get(end)).toBe(1); // ends at the first 1 sample after it
      for (const [ts, v] of values) if (ts > start && ts < end) expect(v).toBe(0);
      expect(end - start).toBeGreaterThanOrEqual(100);
      expect(start).toBeGreaterThan(previousEnd);
      previousEnd = end;
    }
  });
});
