/**
 * The corpora of the buffer benchmarks (bench/chunk-codec.ts, bench/buffer-footprint.ts) and the
 * reference figures beside them: `xz -9e` and `zstd -19` of each corpus's most compact text form.
 *
 *   sensor      bench/sensor-corpus.ts, generated (field devices through this gateway's sources)
 *   realistic   its realistic variant (quantized OPC UA floats on change, polled setpoints)
 *   plant       bench/plant-corpus.ts, generated (1,000 variables, tidy classes)
 *   suthaharan  a public real recording (bench/real-recording.ts), 37,828 samples
 *   csv         BENCH_CSV=path, a recording of your own (variable,timestamp,value)
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { PlantCorpus, type CorpusSample } from './plant-corpus.js';
import { suthaharanSamples } from './real-recording.js';
import { csvSamples, realisticSamples, sensorSamples } from './sensor-corpus.js';

export interface Corpus {
  name: string;
  samples: CorpusSample[];
  source: string;
}

export const CORPUS_NAMES = ['sensor', 'realistic', 'plant', 'suthaharan'] as const;

/** The corpora named in `names` (BENCH_CORPORA), `n` samples of the generated ones. */
export function loadCorpora(names: readonly string[], t0: number, n: number, log: (line: string) => void): Corpus[] {
  const out: Corpus[] = [];
  for (const name of names) {
    if (name === 'sensor') out.push({ name, samples: sensorSamples(t0, n), source: 'generated (bench/sensor-corpus.ts)' });
    else if (name === 'realistic') out.push({ name, samples: realisticSamples(t0, n), source: 'generated, realistic variant (bench/sensor-corpus.ts)' });
    else if (name === 'plant') out.push({ name, samples: plantSamples(t0, n), source: 'generated (bench/plant-corpus.ts, 1,000 variables at plant pace)' });
    else if (name === 'suthaharan') {
      const r = suthaharanSamples(t0);
      if (r.samples) out.push({ name, samples: r.samples, source: r.source });
      else log(`corpus suthaharan skipped: ${r.source}`);
    } else if (name === 'csv' && process.env.BENCH_CSV) out.push({ name: 'csv', samples: csvSamples(process.env.BENCH_CSV, n), source: `recording ${process.env.BENCH_CSV}` });
    else log(`corpus ${name} unknown (known: ${CORPUS_NAMES.join(', ')}, csv with BENCH_CSV)`);
  }
  return out;
}

export function plantSamples(t0: number, n: number): CorpusSample[] {
  const c = new PlantCorpus(t0);
  const out: CorpusSample[] = [];
  for (let s = 0; out.length < n; s++) for (const x of c.second(s)) if (out.length < n) out.push(x);
  return out;
}

/** Samples grouped per variable, each in arrival order. */
export function byVariable(samples: readonly CorpusSample[]): Map<string, { ts: number[]; values: number[] }> {
  const m = new Map<string, { ts: number[]; values: number[] }>();
  for (const s of samples) {
    let e = m.get(s.variable);
    if (!e) m.set(s.variable, (e = { ts: [], values: [] }));
    e.ts.push(s.ts);
    e.values.push(s.value);
  }
  return m;
}

/**
 * Text forms of a corpus, every one lossless (values as JavaScript's shortest round-trip decimal):
 *   long      `variable,ts,value` lines in arrival order
 *   grouped   per variable: its name on a line, then `ts,value` lines
 *   grouped-delta  the same with each timestamp as the difference from the previous one
 *   wide      one line per timestamp, a column per variable (empty where it has no sample), when
 *             at most 64 variables share timestamps (a recording's own CSV)
 */
export function textForms(samples: readonly CorpusSample[]): Array<{ form: string; text: string }> {
  const forms: Array<{ form: string; text: string }> = [];
  forms.push({ form: 'long CSV', text: samples.map((s) => `${s.variable},${s.ts},${s.value}\n`).join('') });
  const groups = byVariable(samples);
  let grouped = '';
  let delta = '';
  for (const [name, g] of groups) {
    const lines: string[] = [`${name}\n`];
    const dl: string[] = [`${name}\n`];
    let prev = 0;
    for (let i = 0; i < g.ts.length; i++) {
      lines.push(`${g.ts[i]},${g.values[i]}\n`);
      dl.push(`${g.ts[i] - prev},${g.values[i]}\n`);
      prev = g.ts[i];
    }
    grouped += lines.join('');
    delta += dl.join('');
  }
  forms.push({ form: 'per variable', text: grouped }, { form: 'per variable, ts deltas', text: delta });
  if (groups.size <= 64) {
    const names = [...groups.keys()];
    const col = new Map(names.map((n, i) => [n, i]));
    const rows = new Map<number, string[]>();
    for (const s of samples) {
      let r = rows.get(s.ts);
      if (!r) rows.set(s.ts, (r = new Array<string>(names.length).fill('')));
      r[col.get(s.variable)!] = String(s.value);
    }
    const ts = [...rows.keys()].sort((a, b) => a - b);
    forms.push({ form: 'wide CSV', text: `ts,${names.join(',')}\n${ts.map((t) => `${t},${rows.get(t)!.join(',')}\n`).join('')}` });
  }
  return forms;
}

/** Compressed size by an external tool, or null when it is not installed. */
export function compressedBy(tool: 'xz' | 'zstd', text: string): Promise<number | null> {
  const args = tool === 'xz' ? ['-9e', '-c', '-T1'] : ['-19', '-c', '-q'];
  return new Promise((resolve) => {
    const p = spawn(tool, args, { stdio: ['pipe', 'pipe', 'ignore'] });
    let bytes = 0;
    p.stdout.on('data', (d: Buffer) => (bytes += d.length));
    p.on('error', () => resolve(null));
    p.on('close', (code) => resolve(code === 0 ? bytes : null));
    p.stdin.on('error', () => undefined);
    p.stdin.end(text);
  });
}

const CACHE = join(homedir(), '.cache', 'edge-gateway-bench', 'text-reference.json');

/**
 * The smallest `xz -9e` and `zstd -19` output over the text forms, with the form that gave it.
 * All eight runs at once (xz -9e takes minutes on a busy machine); the sizes are kept by the text's
 * hash in ~/.cache/edge-gateway-bench, so a second run of the same corpus reads them back.
 */
export async function textReference(samples: readonly CorpusSample[]): Promise<{ xz: { bytes: number; form: string } | null; zstd: { bytes: number; form: string } | null }> {
  const cache: Record<string, number | null> = existsSync(CACHE) ? JSON.parse(readFileSync(CACHE, 'utf8')) : {};
  const runs: Array<Promise<{ tool: 'xz' | 'zstd'; form: string; bytes: number | null }>> = [];
  for (const { form, text } of textForms(samples)) {
    const hash = createHash('sha256').update(text).digest('hex').slice(0, 24);
    for (const tool of ['xz', 'zstd'] as const) {
      const k = `${tool}:${hash}`;
      runs.push(k in cache && cache[k] !== null ? Promise.resolve({ tool, form, bytes: cache[k] }) : compressedBy(tool, text).then((bytes) => ((cache[k] = bytes), { tool, form, bytes })));
    }
  }
  const done = await Promise.all(runs);
  mkdirSync(join(homedir(), '.cache', 'edge-gateway-bench'), { recursive: true });
  writeFileSync(CACHE, JSON.stringify(cache));
  const best = (tool: 'xz' | 'zstd') =>
    done.filter((r) => r.tool === tool && r.bytes !== null).reduce<{ bytes: number; form: string } | null>((m, r) => (!m || r.bytes! < m.bytes ? { bytes: r.bytes!, form: r.form } : m), null);
  return { xz: best('xz'), zstd: best('zstd') };
}
