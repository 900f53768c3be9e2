import { qualityName, type Quality, type QualityTable } from '../core/quality.js';

/** The running sources' quality tables by source name (runtime/stages/sources.ts). */
export type QualityTables = () => ReadonlyMap<string, QualityTable>;

/** What the Variables page gets of a variable's quality: as its source stored it, and the link it follows. */
export interface StoredQuality {
  quality: Quality;
  since: number | null;
  /** The device (a Modbus device) whose link the variable follows; null: its source's. */
  device: string | null;
  /** The source that delivers it (for a variable the configuration does not name). */
  source: string;
}

/**
 * One read of the sources' quality tables for a list or a variable's page: each table aged once
 * (core/quality.ts `age`), then looked up by id, in the source the configuration names first.
 */
export class QualityReads {
  private readonly tables: ReadonlyMap<string, QualityTable>;

  constructor(tables: QualityTables, now: number) {
    this.tables = tables();
    for (const t of this.tables.values()) t.age(now);
  }

  /** Ids in the tables that `listed` says are not listed yet, each once. */
  *unlisted(listed: (id: string) => boolean): Generator<string> {
    const seen = new Set<string>();
    for (const t of this.tables.values()) {
      for (let i = 0; i < t.size; i++) {
        const id = t.idOf(i);
        if (listed(id) || seen.has(id)) continue;
        seen.add(id);
        yield id;
      }
    }
  }

  of(id: string, source: string | null): StoredQuality | null {
    const named = source === null ? undefined : this.tables.get(source);
    const slot = named ? named.slotOf(id) : -1;
    if (named && slot >= 0) return read(named, slot, source!);
    for (const [name, t] of this.tables) {
      if (t === named) continue;
      const i = t.slotOf(id);
      if (i >= 0) return read(t, i, name);
    }
    return null;
  }
}

function read(t: QualityTable, slot: number, source: string): StoredQuality {
  const s = t.stored(slot);
  return { quality: s.quality, since: s.since, device: t.groupName(slot), source };
}

/** A change of a stored quality for the live stream: [id, quality, since]. */
export type QualityChange = [id: string, quality: Quality, since: number | null];

/**
 * The stored qualities that changed since the last call, for the live stream's ticks: each table's
 * codes are kept (a byte per variable) and compared only when its version moved. The link overlay
 * is not sent per variable: the page applies the status it receives (a source of 100,000
 * variables going down is one line of status, not 100,000 changes).
 */
export class QualityChanges {
  private readonly seen = new WeakMap<QualityTable, { version: number; codes: Uint8Array }>();

  /** Takes what is there now as seen (the page loads it with the list). */
  reset(tables: QualityTables, now: number): void {
    for (const t of tables().values()) {
      t.age(now);
      this.seen.set(t, { version: t.version, codes: this.codesOf(t) });
    }
  }

  take(tables: QualityTables, now: number): QualityChange[] {
    const out: QualityChange[] = [];
    for (const t of tables().values()) {
      t.age(now);
      const was = this.seen.get(t);
      if (was && was.version === t.version && was.codes.length === t.size) continue;
      const codes = was?.codes.length === t.size ? was.codes : grown(was?.codes, t.size);
      for (let i = 0; i < t.size; i++) {
        const c = t.storedCode(i);
        if (codes[i] === c) continue;
        codes[i] = c;
        const s = t.stored(i);
        out.push([t.idOf(i), qualityName(c), s.since]);
      }
      this.seen.set(t, { version: t.version, codes });
    }
    return out;
  }

  private codesOf(t: QualityTable): Uint8Array {
    const codes = new Uint8Array(t.size);
    for (let i = 0; i < t.size; i++) codes[i] = t.storedCode(i);
    return codes;
  }
}

function grown(codes: Uint8Array | undefined, size: number): Uint8Array {
  const out = new Uint8Array(size);
  if (codes) out.set(codes.subarray(0, size));
  return out;
}
