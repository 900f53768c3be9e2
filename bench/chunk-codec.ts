/**
 * Benchmark: the chunk codec alone, format 3 (range-coded, codec-v3.ts) against format 2 (varints
 * and deflate, the codec before it) in the same run, on every corpus (bench/corpora.ts): bytes
 * per sample of the chunk data, per signal class, encode and decode rates, and beside them
 * `xz -9e` and `zstd -19` of the corpus's most compact text form. Each variable's samples are cut
 * into chunks of CHUNK samples (4,096: what compaction makes; BENCH_CHUNK=60 shows a trickle's
 * small seals). Every format-3 chunk is checked bit-exact against its samples.
 *
 * Decode rate target: at least the import-file builder's rate, measured in the same run as the
 * serialization of the same samples into import-file items (src/buffer/imports/reader.ts's item
 * text: ISO 8601 time, name, value), which is what a builder does with each decoded sample.
 *
 *   npx tsx bench/chunk-codec.ts
 *   BENCH_SMOKE=1 npx tsx bench/chunk-codec.ts    # 8,000 samples of the sensor corpus (figures mean nothing)
 *   BENCH_CORPORA=sensor,suthaharan BENCH_SMALL=400000 npx tsx bench/chunk-codec.ts
 */
import { decodeChunkInto, encodeChunk, sameSamples, type DecodedChunk } from '../src/buffer/chunks/codec.js';
import { toIsoUtc } from '../src/core/time.js';
import { byVariable, CORPUS_NAMES, loadCorpora, textReference } from './corpora.js';
import { envList, envNumber, NOISY_MACHINE_NOTE, ratioText, smokeBanner, table, verdict } from './lib.js';

const N = envNumber('BENCH_SMALL', 400_000, 8_000);
const CHUNK = envNumber('BENCH_CHUNK', 4096);
const T0 = Date.parse('2026-11-01T00:00:00Z');
const names = envList('BENCH_CORPORA', CORPUS_NAMES.join(','), 'sensor');
smokeBanner(`BENCH_SMALL ${N.toLocaleString('en-US')}, BENCH_CORPORA ${names.join(',')}`);

interface Cut {
  cls: string;
  name: string;
  ts: Float64Array;
  values: Float64Array;
}

function cuts(samples: Parameters<typeof byVariable>[0]): Cut[] {
  const out: Cut[] = [];
  for (const [name, g] of byVariable(samples)) {
    const cls = /^mvr_([a-z0-9]+)_/.exec(name)?.[1] ?? name.replace(/^mote\d+_/, '');
    for (let i = 0; i < g.ts.length; i += CHUNK) out.push({ cls, name, ts: Float64Array.from(g.ts.slice(i, i + CHUNK)), values: Float64Array.from(g.values.slice(i, i + CHUNK)) });
  }
  return out;
}

function time<T>(f: () => T): { ms: number; r: T } {
  const t = performance.now();
  const r = f();
  return { ms: performance.now() - t, r };
}

const rows: Array<Record<string, string | number>> = [];
const verdicts: string[] = [];
for (const corpus of loadCorpora(names, T0, N, (l) => process.stdout.write(`${l}\n`))) {
  const n = corpus.samples.length;
  const cs = cuts(corpus.samples);
  const ref = await textReference(corpus.samples);
  const scratch: DecodedChunk = { ts: new Float64Array(0), values: new Float64Array(0) };
  // Warm both (JIT), then measure.
  for (const c of cs.slice(0, 50)) {
    encodeChunk(c.ts, c.values, { format: 2 });
    encodeChunk(c.ts, c.values);
  }
  const v2 = time(() => cs.map((c) => encodeChunk(c.ts, c.values, { format: 2 })));
  const v3 = time(() => cs.map((c) => encodeChunk(c.ts, c.values)));
  let lossless = true;
  cs.forEach((c, i) => (lossless &&= sameSamples(decodeChunkInto(v3.r[i], scratch), c.ts, c.values)));
  const dec2 = time(() => v2.r.forEach((b) => decodeChunkInto(b, scratch)));
  const dec3 = time(() => v3.r.forEach((b) => decodeChunkInto(b, scratch)));
  const names = new Map<string, string>();
  const items = time(() => {
    let bytes = 0;
    for (const c of cs) {
      let name = names.get(c.name);
      if (name === undefined) names.set(c.name, (name = JSON.stringify(c.name)));
      const parts: string[] = [];
      for (let i = 0; i < c.ts.length; i++) parts.push(`{"timestamp":"${toIsoUtc(c.ts[i])}","machine_variable_id":${name},"value":${c.values[i]}}`);
      bytes += parts.join(',').length;
    }
    return bytes;
  });
  const sum = (bs: Buffer[]) => bs.reduce((a, b) => a + b.length, 0);
  const b2 = sum(v2.r);
  const b3 = sum(v3.r);
  // A smoke run's timings can round to nothing: a rate over at least a microsecond.
  const rate = (ms: number) => Math.round(n / (Math.max(ms, 0.001) / 1000));
  rows.push({
    corpus: corpus.name,
    samples: n,
    variables: new Set(cs.map((c) => c.name)).size,
    'format 2 B/sample': (b2 / n).toFixed(3),
    'format 3 B/sample': (b3 / n).toFixed(3),
    'ratio 2/3': `${ratioText(b2, b3)}x`,
    'xz -9e': ref.xz ? (ref.xz.bytes / n).toFixed(3) : 'xz absent',
    'zstd -19': ref.zstd ? (ref.zstd.bytes / n).toFixed(3) : 'zstd absent',
    'encode 2/3 k/s': `${Math.round(rate(v2.ms) / 1000)} / ${Math.round(rate(v3.ms) / 1000)}`,
    'decode 2/3 k/s': `${Math.round(rate(dec2.ms) / 1000)} / ${Math.round(rate(dec3.ms) / 1000)}`,
    'items k/s': Math.round(rate(items.ms) / 1000),
    lossless: lossless ? 'yes' : 'NO',
  });
  process.stdout.write(`${corpus.name}: ${corpus.source}; smallest text forms: xz ${ref.xz?.form ?? '-'}, zstd ${ref.zstd?.form ?? '-'}\n`);
  const per = new Map<string, { n: number; b2: number; b3: number }>();
  cs.forEach((c, i) => {
    const x = per.get(c.cls) ?? { n: 0, b2: 0, b3: 0 };
    x.n += c.ts.length;
    x.b2 += v2.r[i].length;
    x.b3 += v3.r[i].length;
    per.set(c.cls, x);
  });
  process.stdout.write(`${table([...per.entries()].map(([cls, x]) => ({ class: cls, samples: x.n, share: `${((100 * x.n) / n).toFixed(0)} %`, 'format 2': (x.b2 / x.n).toFixed(3), 'format 3': (x.b3 / x.n).toFixed(3) })))}\n\n`);
  verdicts.push(verdict(lossless, `${corpus.name}: format 3 lossless, bit-exact`));
  if (ref.xz && ref.zstd) verdicts.push(verdict(b3 < ref.xz.bytes && b3 < ref.zstd.bytes, `${corpus.name}: chunk data below xz -9e and zstd -19 of the text (${(b3 / n).toFixed(3)} vs ${(ref.xz.bytes / n).toFixed(3)} / ${(ref.zstd.bytes / n).toFixed(3)})`));
  verdicts.push(verdict(dec3.ms <= items.ms, `${corpus.name}: decode ${Math.round(rate(dec3.ms) / 1000)}k samples/s >= import items ${Math.round(rate(items.ms) / 1000)}k/s`));
}
process.stdout.write(`Chunk codec, chunks of ${CHUNK} samples (${NOISY_MACHINE_NOTE})\n\n${table(rows)}\n\n${verdicts.join('\n')}\n`);
