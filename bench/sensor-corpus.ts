import { readFileSync } from 'node:fs';
import { mulberry32, type CorpusSample } from './plant-corpus.js';

/**
 * Sensor recordings for bench/buffer-footprint.ts and bench/commit-latency.ts: either a real one
 * (`BENCH_CSV=path`: lines `variable,timestamp,value`, timestamp in epoch ms or ISO 8601, a header
 * line is skipped) or this generator, which imitates what field devices deliver through this
 * gateway's sources rather than the plant-like generator's tidy shape (bench/plant-corpus.ts):
 * many slow variables and a few fast ones, values as the sources hand them to the buffer,
 * timestamps as networks deliver them.
 *
 *   adc16      Modbus registers of 4-20 mA transmitters, raw 16-bit counts × span/65535 + offset,
 *              rounded to 15 significant digits as the Modbus source does (src/sources/modbus/
 *              decode.ts): 3.05180437933928, no short form; noise of a few counts; polled every
 *              1, 2, 5 or 10 s with jitter, now and then a late or missed poll
 *   register   Modbus registers in engineering units × 10 or × 100 (scale 0.1 or 0.01): 12.34
 *   float32    OPC UA Float variables: the float32 of a noisy process value as it arrives
 *              (21.3700008392334), 1 s
 *   deadband   MQTT JSON, report-by-exception: sent when the value moved more than its deadband,
 *              or after 60 s without one (irregular timestamps), 2-3 decimals
 *   state      booleans and machine states on change: rare changes, sometimes a burst of chatter,
 *              any millisecond
 *   counter    piece and energy counters: integers or kWh with 3 decimals, rising irregularly, now
 *              and then a reset to 0, 1 s
 *   fast       motor currents and powers at 10-50 Hz over Sparkplug B: a load that moves slowly and
 *              now and then steps, 0.3 % noise, a 12-bit ADC scaled by a float factor in the
 *              device, sent as Float (the decoder's shortest decimal of the float32), device clock
 *              with ±1 ms jitter, one batch a second
 *
 * The noise levels are those of ordinary instrumentation (0.01-0.5 % of span). They were set so
 * that the codec's output on this corpus (bench/buffer-footprint.ts prints it per class) is of the
 * order of the issue 22 recording's (1.82 bytes per sample), so that the buffer's own overheads,
 * what the benchmark is about, weigh as they would on real data. It came out harder than that
 * (2.94 B/sample with the codec of issue 22's merge): its float32 class is a continuous value with
 * full-precision float noise, which no field device delivers.
 *
 * The REALISTIC variant (`realistic: true`, `realisticSamples`; the benchmarks label it) changes
 * only what the generator gets wrong about devices, and keeps the rest (seed, classes, rates):
 *
 *   float32    an OPC UA Float of an analog input: the PLC's 16-bit count × span/65535 as float32,
 *              1-4 counts of noise, and sent on change only (the default OPC UA DataChangeTrigger,
 *              StatusValue, reports no unchanged value; sampling interval 1 s)
 *   setpoint   60 more variables: Modbus holding registers that a poll list carries beside the
 *              measurements (setpoints, modes, recipe numbers) in 0.1 units, polled every 1 or 2 s
 *              and changed by an operator now and then (about once in 20 minutes)
 *
 * It is not tuned to a figure: both corpora are reported side by side.
 *
 * Deterministic (seeded); samples come in arrival order, one call per second of plant time.
 */

interface Variable {
  name: string;
  cls: 'adc16' | 'register' | 'float32' | 'deadband' | 'state' | 'counter' | 'fast' | 'setpoint';
  /** Poll period in ms (0: on change or on exception). */
  periodMs: number;
  hz: number;
  scale: number;
  offset: number;
  level: number;
  drift: number;
  noise: number;
  last: number;
  lastSentAt: number;
  deadband: number;
  decimals: number;
  nextPollAt: number;
  phase: number;
}

/** Variables per class for `size` = 1 (300 variables, ~380 samples a second). */
const MIX: Array<[Variable['cls'], number]> = [
  ['adc16', 60],
  ['register', 90],
  ['float32', 40],
  ['deadband', 40],
  ['state', 40],
  ['counter', 20],
  ['fast', 10],
];

/** The realistic variant's extra variables (see the header). */
const REALISTIC_EXTRA: Array<[Variable['cls'], number]> = [['setpoint', 60]];

export class SensorCorpus {
  readonly variables: Variable[] = [];
  private readonly r: () => number;
  private spare: number | null = null;

  constructor(
    readonly t0: number,
    size = 1,
    seed = 4242,
    readonly realistic = false,
  ) {
    this.r = mulberry32(seed);
    let i = 0;
    for (const [cls, count] of realistic ? [...MIX, ...REALISTIC_EXTRA] : MIX) {
      for (let k = 0; k < count * size; k++) {
        const r = this.r();
        const span = [1, 10, 16, 100, 250, 1000][k % 6];
        this.variables.push({
          name: `mvr_${cls}_${i++}`,
          cls,
          periodMs: cls === 'adc16' || cls === 'register' ? [1000, 2000, 5000, 10000][k % 4] : cls === 'setpoint' ? [1000, 2000][k % 2] : cls === 'float32' || cls === 'counter' ? 1000 : 0,
          hz: cls === 'fast' ? [10, 20, 25, 50][k % 4] : 0,
          scale: cls === 'adc16' ? span / 65535 : cls === 'register' ? (k % 2 === 0 ? 0.1 : 0.01) : cls === 'fast' ? (span / 4095) * (1 + r * 0.01) : 1,
          offset: cls === 'adc16' ? -span * 0.25 : 0,
          level: cls === 'counter' ? Math.floor(r * 1e6) : cls === 'state' ? 0 : cls === 'setpoint' ? Math.round(r * span * 10) / 10 : 0.3 + r * 0.4,
          drift: 0,
          noise: cls === 'adc16' ? 2 + r * 6 : cls === 'register' ? 0.5 + r * 3 : cls === 'float32' && realistic ? 1 + r * 3 : 0.002 + r * 0.01,
          last: Number.NaN,
          lastSentAt: -Infinity,
          deadband: 0.002 + r * 0.01,
          decimals: cls === 'deadband' ? 2 + (k % 2) : cls === 'counter' ? (k % 3 === 0 ? 3 : 0) : 0,
          nextPollAt: t0 + Math.floor(r * 1000),
          phase: r * 2 * Math.PI,
        });
      }
    }
  }

  private gauss(): number {
    if (this.spare !== null) {
      const s = this.spare;
      this.spare = null;
      return s;
    }
    const u = Math.max(1e-12, this.r());
    const v = this.r();
    const m = Math.sqrt(-2 * Math.log(u));
    this.spare = m * Math.sin(2 * Math.PI * v);
    return m * Math.cos(2 * Math.PI * v);
  }

  /** The process value of a variable at plant time t (a slow random walk around a daily wave). */
  private process(v: Variable, t: number): number {
    v.drift += this.gauss() * 0.0005;
    v.drift *= 0.999;
    return Math.min(1, Math.max(0, v.level + v.drift + 0.05 * Math.sin((t - this.t0) / 3_600_000 + v.phase)));
  }

  /** Samples of plant second `s` (0-based) in arrival order. */
  second(s: number): CorpusSample[] {
    const out: CorpusSample[] = [];
    const base = this.t0 + s * 1000;
    for (const v of this.variables) {
      switch (v.cls) {
        case 'adc16':
        case 'register': {
          while (v.nextPollAt < base + 1000) {
            const t = v.nextPollAt;
            v.nextPollAt += v.periodMs;
            if (this.r() < 0.003) continue; // a missed poll
            const late = this.r() < 0.02 ? 200 + Math.floor(this.r() * 600) : Math.floor(this.r() * 40);
            // adc16: counts of a 16-bit ADC; register: the device's integer in 0.1 or 0.01 units.
            const full = v.cls === 'adc16' ? 65535 : 10_000;
            const raw = Math.min(full, Math.max(0, Math.round(this.process(v, t) * full + this.gauss() * v.noise)));
            out.push({ variable: v.name, ts: t + late, value: Number((raw * v.scale + v.offset).toPrecision(15)) });
          }
          break;
        }
        case 'float32': {
          if (this.realistic) {
            // The PLC's 16-bit count, scaled to -20..100 as float32; OPC UA sends changes only.
            const raw = Math.min(65535, Math.max(0, Math.round(this.process(v, base) * 65535 + this.gauss() * v.noise)));
            const x = Math.fround(raw * (120 / 65535) - 20);
            if (x !== v.last) {
              v.last = x;
              out.push({ variable: v.name, ts: base + Math.floor(this.r() * 30), value: x });
            }
            break;
          }
          const x = (this.process(v, base) + this.gauss() * v.noise) * 120 - 20;
          out.push({ variable: v.name, ts: base + Math.floor(this.r() * 30), value: Math.fround(x) });
          break;
        }
        case 'deadband': {
          // Checked every 100 ms at the device; sent on a move beyond the deadband or after 60 s.
          for (let k = 0; k < 10; k++) {
            const t = base + k * 100 + Math.floor(this.r() * 100);
            const x = this.process(v, t) + this.gauss() * v.noise * 0.3;
            if (Number.isNaN(v.last) || Math.abs(x - v.last) > v.deadband || t - v.lastSentAt >= 60_000) {
              v.last = x;
              v.lastSentAt = t;
              const f = 10 ** v.decimals;
              out.push({ variable: v.name, ts: t, value: Math.round(x * 400 * f) / f });
            }
          }
          break;
        }
        case 'state': {
          const chatter = this.r() < 0.001;
          const changes = chatter ? 3 + Math.floor(this.r() * 8) : this.r() < 1 / 180 ? 1 : 0;
          for (let c = 0; c < changes; c++) {
            v.level = v.phase > Math.PI ? 1 - v.level : (v.level + 1 + Math.floor(this.r() * 4)) % 6;
            out.push({ variable: v.name, ts: base + Math.floor(this.r() * 1000), value: v.level });
          }
          break;
        }
        case 'counter': {
          if (this.r() < 1 / 20_000) v.level = 0; // rollover or a reset at the device
          v.level += Math.max(0, this.gauss() * 2 + (v.decimals > 0 ? 0.4 : 1.5));
          const f = 10 ** v.decimals;
          out.push({ variable: v.name, ts: base + Math.floor(this.r() * 20), value: Math.floor(v.level * f) / f });
          break;
        }
        case 'setpoint': {
          while (v.nextPollAt < base + 1000) {
            const t = v.nextPollAt;
            v.nextPollAt += v.periodMs;
            if (this.r() < 0.003) continue; // a missed poll
            if (this.r() < v.periodMs / 1_200_000) v.level = Math.max(0, Math.round((v.level + (this.r() - 0.5) * v.level * 0.2 + 1) * 10) / 10);
            out.push({ variable: v.name, ts: t + Math.floor(this.r() * 40), value: v.level });
          }
          break;
        }
        case 'fast': {
          // Sampled by the device's clock, sent as Sparkplug Float, one batch per second; the
          // decoder keeps the shortest decimal that is the same float32 (src/sources/mqtt/decoders).
          if (this.r() < 1 / 300) v.level = 0.2 + this.r() * 0.7; // a load step
          for (let k = 0; k < v.hz; k++) {
            const t = base + Math.round((k * 1000) / v.hz) + Math.round(this.gauss());
            v.drift += (v.level - v.drift) * 0.01;
            const x = v.drift + this.gauss() * 0.003;
            out.push({ variable: v.name, ts: t, value: shortestFloat32(Math.round(Math.min(1, Math.max(0, x)) * 4095) * v.scale) });
          }
          break;
        }
      }
    }
    return out;
  }
}

/** The shortest decimal that reads back as the same float32 (what the Sparkplug decoder hands on). */
function shortestFloat32(v: number): number {
  const f = Math.fround(v);
  for (let p = 1; p <= 9; p++) {
    const c = Number(f.toPrecision(p));
    if (Math.fround(c) === f) return c;
  }
  return f;
}

/** The first `n` samples of the generated corpus (or its realistic variant), in arrival order. */
export function sensorSamples(t0: number, n: number, size = 1, realistic = false): CorpusSample[] {
  const c = new SensorCorpus(t0, size, 4242, realistic);
  const out: CorpusSample[] = [];
  for (let s = 0; out.length < n; s++) for (const x of c.second(s)) if (out.length < n) out.push(x);
  return out;
}

/** A recording from a CSV file (`variable,timestamp,value`), in timestamp order; `n` limits it. */
export function csvSamples(path: string, n = Infinity): CorpusSample[] {
  const out: CorpusSample[] = [];
  for (const line of readFileSync(path, 'utf8').split(/\r?\n/)) {
    if (out.length >= n) break;
    const [variable, ts, value] = line.split(',').map((x) => x.trim());
    if (!variable || ts === undefined || value === undefined) continue;
    const t = /^\d+(\.\d+)?$/.test(ts) ? Number(ts) : Date.parse(ts);
    const v = Number(value);
    if (!Number.isFinite(t) || !Number.isFinite(v)) continue; // the header, or a bad line
    out.push({ variable, ts: Math.trunc(t), value: v });
  }
  return out.sort((a, b) => a.ts - b.ts);
}

/** The realistic variant's first `n` samples (see the header). */
export function realisticSamples(t0: number, n: number): CorpusSample[] {
  return sensorSamples(t0, n, 1, true);
}

/** BENCH_CSV when set, else `n` generated samples: the small corpus of the benchmarks (`realistic`: the variant). */
export function smallCorpus(t0: number, n: number, realistic = false): { samples: CorpusSample[]; source: string } {
  const csv = process.env.BENCH_CSV;
  if (csv) return { samples: csvSamples(csv, n), source: `recording ${csv}` };
  if (realistic) return { samples: realisticSamples(t0, n), source: 'generated sensor corpus, REALISTIC variant (bench/sensor-corpus.ts: quantized OPC UA floats on change, polled setpoints)' };
  return { samples: sensorSamples(t0, n), source: 'generated sensor corpus (bench/sensor-corpus.ts)' };
}
