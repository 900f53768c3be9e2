/**
 * A corpus that looks like a plant, for bench/buffer-footprint.ts. Deterministic (seeded), time
 * ordered (one call per second of plant time returns that second's samples of every variable).
 *
 * Signal classes, each at its resolution (not 64 bits of noise, not conveniently round either):
 *   analog      pressures, flows, levels: drift + Gaussian noise, 4-6 significant digits
 *   float32     the same read from an OPC UA Float: the float32 value as a double (21.3700008392334),
 *               which has no short decimal form
 *   temperature slow first-order response to set-point steps, 0.1 or 0.01 degree resolution
 *   counter     energy / piece counters: integers rising at a noisy rate, some huge (beyond 2^32)
 *   state       booleans and machine states: half polled at 1 Hz, half on change (irregular
 *               timestamps from MQTT)
 *   adc12       raw 12-bit ADC counts, a level with ±3 counts of noise
 *   fast        vibration / motor current at 10-100 Hz, 4 significant digits
 * Timestamps: polled ones jitter by a few ms; MQTT ones are irregular and now and then repeated
 * or a little backwards (late delivery).
 */

export type SignalClass = 'analog' | 'float32' | 'temperature' | 'counter' | 'state' | 'adc12' | 'fast';

export interface CorpusVariable {
  name: string;
  cls: SignalClass;
  /** Samples per second (0 for on-change). */
  hz: number;
  digits: number;
  level: number;
  state: number;
  phase: number;
}

export interface CorpusSample {
  variable: string;
  ts: number;
  value: number;
}

export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Share of variables per class (of 1,000): most are 1 Hz analog, a few are fast. */
export const CLASS_MIX: Array<[SignalClass, number]> = [
  ['analog', 300],
  ['float32', 80],
  ['temperature', 150],
  ['counter', 100],
  ['state', 200],
  ['adc12', 150],
  ['fast', 20],
];

function sig(v: number, digits: number): number {
  return Number(v.toPrecision(digits));
}

export class PlantCorpus {
  readonly variables: CorpusVariable[] = [];
  private readonly r: () => number;
  private spare: number | null = null;

  constructor(
    readonly t0: number,
    variablesPer1000 = 1,
    seed = 2026,
  ) {
    this.r = mulberry32(seed);
    let i = 0;
    for (const [cls, count] of CLASS_MIX) {
      for (let k = 0; k < count * variablesPer1000; k++) {
        const r = this.r();
        this.variables.push({
          name: `mvr_${cls}_${i++}`,
          cls,
          hz: cls === 'fast' ? [10, 20, 50, 100][k % 4] : cls === 'state' && k % 2 === 1 ? 0 : cls === 'temperature' && k % 3 === 0 ? 0.2 : 1,
          digits: cls === 'analog' || cls === 'float32' ? 4 + (k % 3) : cls === 'fast' ? 4 : cls === 'temperature' ? (k % 2 === 0 ? 1 : 2) : 0,
          level: cls === 'counter' ? (k % 5 === 0 ? 2 ** 40 + Math.floor(r * 1e9) : Math.floor(r * 1e6)) : cls === 'adc12' ? 500 + Math.floor(r * 3000) : cls === 'temperature' ? 20 + r * 60 : 10 ** (Math.floor(r * 4) - 1) * (1 + r * 9),
          state: 0,
          phase: r * Math.PI * 2,
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

  /** The samples of plant second `s` (0-based), in arrival order (time order with MQTT's quirks). */
  second(s: number): CorpusSample[] {
    const out: CorpusSample[] = [];
    const base = this.t0 + s * 1000;
    for (const v of this.variables) {
      switch (v.cls) {
        case 'analog':
        case 'float32': {
          v.state += this.gauss() * 0.002 * v.level;
          const x = v.level + v.state + Math.sin(s / 600 + v.phase) * 0.05 * v.level + this.gauss() * 0.003 * v.level;
          const value = v.cls === 'float32' ? Math.fround(x) : sig(x, v.digits);
          out.push({ variable: v.name, ts: base + Math.round(this.r() * 8), value });
          break;
        }
        case 'temperature': {
          if (this.r() < 1 / 1800) v.level = 20 + this.r() * 60; // a new set point now and then
          v.state += (v.level - v.state) / 300;
          if (v.hz === 0.2 && s % 5 !== 0) break;
          const step = v.digits === 1 ? 10 : 100;
          out.push({ variable: v.name, ts: base + Math.round(this.r() * 5), value: Math.round((v.state + this.gauss() * 0.02) * step) / step });
          break;
        }
        case 'counter': {
          v.level += Math.max(0, Math.round(3 + this.gauss() * 1.5));
          out.push({ variable: v.name, ts: base + Math.round(this.r() * 5), value: v.level });
          break;
        }
        case 'state': {
          const changed = this.r() < 1 / 120;
          if (changed) v.state = v.phase > Math.PI ? 1 - v.state : (v.state + 1 + Math.floor(this.r() * 3)) % 5;
          if (v.hz === 1) out.push({ variable: v.name, ts: base + Math.round(this.r() * 10), value: v.state });
          else if (changed) {
            // On change over MQTT: any millisecond; now and then delivered late (backwards) or twice.
            const ts = base + Math.floor(this.r() * 1000) - (this.r() < 0.05 ? 1500 : 0);
            out.push({ variable: v.name, ts, value: v.state });
            if (this.r() < 0.03) out.push({ variable: v.name, ts, value: v.state });
          }
          break;
        }
        case 'adc12': {
          if (this.r() < 0.01) v.level = Math.min(4095, Math.max(0, v.level + Math.round(this.gauss() * 40)));
          out.push({ variable: v.name, ts: base + Math.round(this.r() * 4), value: Math.min(4095, Math.max(0, Math.round(v.level + this.gauss() * 1.5))) });
          break;
        }
        case 'fast': {
          const period = 1000 / v.hz;
          for (let k = 0; k < v.hz; k++) {
            const t = s + k / v.hz;
            const x = v.level * (1 + 0.3 * Math.sin(2 * Math.PI * 1.7 * t + v.phase)) + this.gauss() * 0.01 * v.level;
            out.push({ variable: v.name, ts: base + Math.round(k * period + this.r() * 2), value: sig(x, v.digits) });
          }
          break;
        }
      }
    }
    return out;
  }

  /** Samples per plant second, on average. */
  get samplesPerSecond(): number {
    let n = 0;
    for (const v of this.variables) n += v.hz === 0 ? 1 / 120 : v.hz;
    return n;
  }

  classOf(name: string): SignalClass {
    return name.split('_')[1] as SignalClass;
  }
}
