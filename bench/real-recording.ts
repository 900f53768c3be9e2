/**
 * A public real recording for the buffer benchmarks: the single-hop wireless sensor network data
 * set of Suthaharan et al. ("Labelled data collection for anomaly detection in wireless sensor
 * networks", ISSNIP 2010): four TelosB motes (two indoor, two outdoor), humidity (%RH, temperature
 * corrected) and temperature (°C) at 2 decimals, one reading every 5 seconds over six hours on
 * 9 May 2010: 18,914 readings, 37,828 samples on 8 variables.
 *
 * Where it comes from: the npm package `@stdlib/datasets-suthaharan-single-hop-sensor-network`
 * (0.2.3, Apache-2.0, the stdlib authors' copy of the authors' published files). Looked for in
 * node_modules first, else fetched once with `npm pack` (the npm registry is the only network
 * the project's machines reach) into ~/.cache/edge-gateway-bench.
 *
 * The files carry the reading number, not a time: reading r of a mote is at t0 + (r − 1) × 5 s, so
 * its clock is regular (jitter-free), as a mote's own timer is. The benchmark says so beside its figures.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { CorpusSample } from './plant-corpus.js';
import { ROOT } from './lib.js';

export const RECORDING_PACKAGE = '@stdlib/datasets-suthaharan-single-hop-sensor-network';
const VERSION = '0.2.3';

/** The package's data directory, or null with the reason when it cannot be had. */
export function recordingDir(): { dir: string | null; why: string } {
  const installed = join(ROOT, 'node_modules', RECORDING_PACKAGE, 'data');
  if (existsSync(installed)) return { dir: installed, why: 'node_modules' };
  const cache = join(homedir(), '.cache', 'edge-gateway-bench', `suthaharan-${VERSION}`);
  const data = join(cache, 'package', 'data');
  if (existsSync(data)) return { dir: data, why: 'cache' };
  try {
    mkdirSync(cache, { recursive: true });
    execFileSync('npm', ['pack', `${RECORDING_PACKAGE}@${VERSION}`, '--silent'], { cwd: cache, stdio: ['ignore', 'ignore', 'pipe'], timeout: 120_000 });
    const tgz = readdirSync(cache).find((f) => f.endsWith('.tgz'));
    if (!tgz) return { dir: null, why: 'npm pack wrote no archive' };
    execFileSync('tar', ['-xzf', tgz], { cwd: cache });
    return existsSync(data) ? { dir: data, why: 'npm pack' } : { dir: null, why: 'the archive has no data directory' };
  } catch (err) {
    return { dir: null, why: `npm pack ${RECORDING_PACKAGE}@${VERSION} failed: ${(err as Error).message.split('\n')[0]}` };
  }
}

/** The recording's samples in arrival order (by time, motes in turn), or null when it cannot be had. */
export function suthaharanSamples(t0: number): { samples: CorpusSample[]; source: string } | { samples: null; source: string } {
  const { dir, why } = recordingDir();
  if (!dir) return { samples: null, source: why };
  const out: CorpusSample[] = [];
  for (const file of readdirSync(dir).filter((f) => /^singlehop_.*_data\.txt$/.test(f)).sort()) {
    for (const line of readFileSync(join(dir, file), 'utf8').split(/\r?\n/)) {
      const [reading, mote, humidity, temperature] = line.trim().split(/\s+/).map(Number);
      if (!Number.isFinite(reading) || !Number.isFinite(humidity)) continue; // the header
      const ts = t0 + (reading - 1) * 5_000;
      out.push({ variable: `mote${mote}_humidity`, ts, value: humidity }, { variable: `mote${mote}_temperature`, ts, value: temperature });
    }
  }
  out.sort((a, b) => a.ts - b.ts);
  return { samples: out, source: `${RECORDING_PACKAGE}@${VERSION} (Apache-2.0; Suthaharan et al., ISSNIP 2010), from ${why}` };
}
