/**
 * The quality of every variable a source delivers: good, uncertain, bad, stale, or no value yet.
 *
 * Where it comes from:
 * - the protocol, at the point where a reading becomes a value: an OPC UA StatusCode's severity
 *   (Part 4 §7.39: Good, Uncertain, Bad), a Modbus exception response (Modbus Application Protocol
 *   §7), an OPC-style Quality property of a Sparkplug metric, a Sparkplug NDEATH/DDEATH (Sparkplug B
 *   3.0 chapter 5: the host marks every metric of that edge node or device stale), an MQTT
 *   publisher's last will;
 * - age, for variables read on a period (a poll, a generator): no reading for `staleAfterMs(period)`
 *   makes the last one stale. A variable reported only on change (an OPC UA subscription, MQTT) is
 *   never stale by age alone: an hour-old door state is current;
 * - the link: while the source (or its device) is down, every variable of it is stale, from the
 *   moment the transport reported the loss. That is an overlay, not written into the table: when
 *   the link is back each variable shows what it last had again until its next reading.
 *
 * The bookkeeping is per source in a few typed arrays, one slot per variable (a byte of quality,
 * the wall time of the last reading and of the last change, a 16-bit group): a reading costs a
 * compare and two stores, no object. At 100,000 values per second that is what the hot path can
 * afford; everything else (age, the link overlay, counts) is worked out when someone reads.
 */

export const QUALITIES = ['none', 'good', 'uncertain', 'bad', 'stale'] as const;
export type Quality = (typeof QUALITIES)[number];
export type QualityCounts = Record<Quality, number>;

/** Quality codes as stored (one byte per variable). */
export const Q_NONE = 0;
export const Q_GOOD = 1;
export const Q_UNCERTAIN = 2;
export const Q_BAD = 3;
export const Q_STALE = 4;
export type QualityCode = typeof Q_NONE | typeof Q_GOOD | typeof Q_UNCERTAIN | typeof Q_BAD | typeof Q_STALE;

/** Readings a periodic variable may miss before its last value is stale. */
export const STALE_AFTER_PERIODS = 3;
/** ...and never sooner than this after the last reading (a busy machine delays a 100 ms poll). */
export const STALE_MIN_MS = 2_000;

/** How long after its last reading a variable read every `periodMs` is stale (0: read on change, never by age). */
export function staleAfterMs(periodMs: number): number {
  return periodMs > 0 ? Math.max(STALE_AFTER_PERIODS * periodMs, STALE_MIN_MS) : Infinity;
}

/** OPC UA Part 4 §7.39: the StatusCode's two top bits are its severity, 00 Good, 01 Uncertain, 10 and 11 Bad. */
export function qualityOfStatusCode(code: number): QualityCode {
  const top = code >>> 30;
  return top === 0 ? Q_GOOD : top === 1 ? Q_UNCERTAIN : Q_BAD;
}

export function qualityName(code: number): Quality {
  return QUALITIES[code] ?? 'none';
}

export function emptyCounts(): QualityCounts {
  return { none: 0, good: 0, uncertain: 0, bad: 0, stale: 0 };
}

/** A quality as shown, with since when (epoch ms; null for no value yet). */
export interface QualityReading {
  quality: Quality;
  since: number | null;
}

/**
 * A stored quality seen through the link: stale from `linkDownSince` while the link is down (from
 * the earlier time when it was stale already). No value yet stays that. Pure; the console's page
 * applies it to the rows it holds with the status it receives, the gateway to its counts.
 */
export function throughLink(stored: Quality, since: number | null, linkDownSince: number | null): QualityReading {
  if (stored === 'none' || linkDownSince === null) return { quality: stored, since };
  return { quality: 'stale', since: stored === 'stale' && since !== null ? Math.min(since, linkDownSince) : linkDownSince };
}

/** What `/status` shows of a source's (or device's) variables. */
export interface QualitySummary extends QualityCounts {
  /** Variables with a slot (configured, or seen when the source names them as data arrives). */
  total: number;
}

interface Group {
  name: string | null;
  staleAfter: number;
  downSince: number | null;
}

const INITIAL = 64;

/**
 * One source's variables and their quality. Slots are given in order of `add` (a source adds its
 * configured variables at build time, so an OPC UA node's slot is its place in `nodes`), and by
 * `slotFor` for variables the source learns from the data (MQTT names, Sparkplug metrics), up to
 * `maxSlots`.
 */
export class QualityTable {
  private code = new Uint8Array(INITIAL);
  private seen = new Float64Array(INITIAL);
  private changed = new Float64Array(INITIAL);
  private group = new Uint16Array(INITIAL);
  /** Where the last reading came from (a Sparkplug edge node or device, an MQTT subscription); allocated on first use. */
  private origin: Int32Array | null = null;
  private readonly ids: string[] = [];
  private index: Map<string, number> | null = null;
  private readonly groups: Group[] = [{ name: null, staleAfter: Infinity, downSince: null }];
  /** Since when the whole source is down (set by SourceStats from its state); null while up. */
  sourceDownSince: number | null = null;
  /** Grows whenever a stored quality changes: a reader that saw this number has nothing new to read. */
  version = 0;

  constructor(readonly maxSlots = 1_000_000) {}

  get size(): number {
    return this.ids.length;
  }

  /** A group of variables sharing a link and a period (a Modbus device); group 0 is the source's own, on change. */
  addGroup(name: string | null, periodMs: number): number {
    this.groups.push({ name, staleAfter: staleAfterMs(periodMs), downSince: null });
    return this.groups.length - 1;
  }

  /** Sets the period of group 0 (a generator's interval, an OPC UA server's polling interval). */
  setPeriod(periodMs: number, group = 0): void {
    this.groups[group].staleAfter = staleAfterMs(periodMs);
  }

  /** Adds a slot for `id` in `group`; -1 once maxSlots are taken. */
  add(id: string, group = 0): number {
    const slot = this.ids.length;
    if (slot >= this.maxSlots) return -1;
    if (slot === this.code.length) this.grow();
    this.ids.push(id);
    this.group[slot] = group;
    if (this.index && !this.index.has(id)) this.index.set(id, slot);
    return slot;
  }

  /** Makes room for `n` slots at once (a source that knows its variables allocates once, exactly). */
  reserve(n: number): void {
    if (n > this.code.length) this.grow(Math.min(this.maxSlots, n));
  }

  /** The slot of `id` (the first when it was added twice), or -1. */
  slotOf(id: string): number {
    return this.lookup().get(id) ?? -1;
  }

  /** The slot of `id`, added to `group` when the source names it for the first time; -1 when full. */
  slotFor(id: string, group = 0): number {
    const i = this.lookup().get(id);
    return i !== undefined ? i : this.add(id, group);
  }

  idOf(slot: number): string {
    return this.ids[slot];
  }

  /** The hot path: a reading of `slot` at wall time `at` with quality `q`. */
  set(slot: number, q: QualityCode, at: number): void {
    this.seen[slot] = at;
    if (this.code[slot] !== q) {
      this.code[slot] = q;
      this.changed[slot] = at;
      this.version++;
    }
  }

  /** `set`, remembering where the reading came from (see `staleFrom`). */
  setFrom(slot: number, q: QualityCode, at: number, origin: number): void {
    (this.origin ??= new Int32Array(this.code.length))[slot] = origin;
    this.set(slot, q, at);
  }

  /** Every variable whose last reading came from one of `origins` is stale from `at` (Sparkplug NDEATH/DDEATH, a last will). */
  staleFrom(origins: ReadonlySet<number>, at: number): number {
    const o = this.origin;
    if (!o || origins.size === 0) return 0;
    let n = 0;
    for (let i = 0; i < this.ids.length; i++) {
      if (this.code[i] === Q_NONE || this.code[i] === Q_STALE || !origins.has(o[i])) continue;
      this.code[i] = Q_STALE;
      this.changed[i] = at;
      n++;
    }
    if (n > 0) this.version++;
    return n;
  }

  /** A device's (group's) link went down at `at`, or came back (null). */
  setGroupDown(group: number, at: number | null): void {
    const g = this.groups[group];
    if (at === null) g.downSince = null;
    else if (g.downSince === null) g.downSince = at;
  }

  groupDownSince(group: number): number | null {
    return this.groups[group].downSince;
  }

  /** Since when the link of `slot` is down (its source's or its group's), or null. */
  linkDownSince(slot: number): number | null {
    const g = this.groups[this.group[slot]].downSince;
    const s = this.sourceDownSince;
    return s === null ? g : g === null ? s : Math.min(s, g);
  }

  groupName(slot: number): string | null {
    return this.groups[this.group[slot]].name;
  }

  /**
   * Writes age into the table: a periodic variable without a reading for its group's
   * `staleAfterMs` is stale from the moment it became so. Idempotent; readers call it first. A
   * table of variables reported on change only (an OPC UA subscription, MQTT) has nothing to age.
   */
  age(now: number): void {
    const groups = this.groups;
    if (!groups.some((g) => g.staleAfter !== Infinity)) return;
    const after = Float64Array.from(groups, (g) => g.staleAfter);
    const code = this.code;
    const seen = this.seen;
    const group = this.group;
    let changed = false;
    for (let i = 0; i < this.ids.length; i++) {
      const c = code[i];
      if (c === Q_NONE || c === Q_STALE) continue;
      const a = after[group[i]];
      if (now - seen[i] < a) continue;
      code[i] = Q_STALE;
      this.changed[i] = seen[i] + a;
      changed = true;
    }
    if (changed) this.version++;
  }

  /** The stored quality of `slot` (after `age`) and since when; the link overlay is not applied. */
  stored(slot: number): QualityReading {
    const c = this.code[slot];
    return { quality: qualityName(c), since: c === Q_NONE ? null : this.changed[slot] };
  }

  storedCode(slot: number): number {
    return this.code[slot];
  }

  /** What a reader shows of `slot`: stored quality through the link. Call `age(now)` first. */
  reading(slot: number): QualityReading {
    const s = this.stored(slot);
    return throughLink(s.quality, s.since, this.linkDownSince(slot));
  }

  /** Counts of the whole table, or of one group, as shown (age and link applied). One pass over the codes. */
  summary(now: number, group?: number): QualitySummary {
    this.age(now);
    const kinds = QUALITIES.length;
    const byGroup = new Uint32Array(this.groups.length * kinds);
    const code = this.code;
    const groupOf = this.group;
    for (let i = 0; i < this.ids.length; i++) byGroup[groupOf[i] * kinds + code[i]]++;
    const out: QualitySummary = { ...emptyCounts(), total: 0 };
    this.groups.forEach((g, gi) => {
      if (group !== undefined && gi !== group) return;
      const down = this.sourceDownSince ?? g.downSince;
      for (let c = 0; c < kinds; c++) {
        const n = byGroup[gi * kinds + c];
        out.total += n;
        // While the link is down everything but "no value yet" reads stale.
        if (c !== Q_NONE && down !== null) out.stale += n;
        else out[QUALITIES[c]] += n;
      }
    });
    return out;
  }

  private lookup(): Map<string, number> {
    if (!this.index) {
      // Built when first asked (the console, an MQTT source naming variables as data arrives): an
      // OPC UA source of 100,000 nodes reads by slot and needs no map until someone looks one up.
      const m = new Map<string, number>();
      this.ids.forEach((id, i) => m.has(id) || m.set(id, i));
      this.index = m;
    }
    return this.index;
  }

  private grow(to = Math.min(this.maxSlots, this.code.length * 2)): void {
    const n = to;
    const code = new Uint8Array(n);
    code.set(this.code);
    const seen = new Float64Array(n);
    seen.set(this.seen);
    const changed = new Float64Array(n);
    changed.set(this.changed);
    const group = new Uint16Array(n);
    group.set(this.group);
    this.code = code;
    this.seen = seen;
    this.changed = changed;
    this.group = group;
    if (this.origin) {
      const origin = new Int32Array(n);
      origin.set(this.origin);
      this.origin = origin;
    }
  }
}
