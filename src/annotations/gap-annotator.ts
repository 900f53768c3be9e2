import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { GapLedger, GapReason, GapRow } from '../buffer/gaps.js';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import type { SourceInfo } from '../sources/inventory.js';
import { kindLabel } from '../sources/plugins.js';
import { EXTERNAL_ID_PATTERN, MAX_EXTERNAL_ID_CHARS, MAX_MACHINE_VARIABLES, MAX_TEXT_CHARS, type NewAnnotation, type SiteRef } from './model.js';
import type { AnnotationStore } from './store.js';

/**
 * Gaps the cloud can see (issue 14 §3): each closed gap that history did not fill (filled `no` or
 * `partial`) and that lasted at least `gaps.min_duration` becomes a range annotation (§2.3) through
 * the annotation outbox, so it is delivered exactly once like every other annotation:
 *
 * - `started_at`/`ended_at`: the gap's from/to; `site`: annotations.site (a gateway serves one
 *   site, so that is the site of every machine it reads);
 * - `machine_variables`: the gap's variables, or all the source's configured variables when the
 *   gap is about the whole source; more than 100 (§2.3 limit) are split over several annotations;
 * - `text`: "No data from Press 1 (OPC UA): gateway stopped" — the configured machine names of the
 *   variables when they have one, else the source name;
 * - `external_id`: derived from the gateway, the gap's source, scope, reason, start and the part
 *   number, so it is stable across retries and even across a lost buffer file (a repeat meets 409).
 *
 * The outbox rows and the gap's `annotation_ids` are written in one transaction (gaps.ts G3).
 */

const REASON_TEXT: Record<GapReason, string> = {
  gateway_stopped: 'gateway stopped',
  source_disconnected: 'source disconnected',
  device_error: 'device not answering',
  buffer_full: 'samples dropped because the buffer was full',
  values_lost: 'values lost before they reached the gateway\'s buffer',
};
const POLL_MS = 5_000;

export interface GapAnnotatorOptions {
  ledger: GapLedger;
  store: AnnotationStore;
  gatewayName: string;
  site: SiteRef;
  /** Configured machines: names for the text. */
  machines: ReadonlyArray<{ key: string; name?: string; machine_variables: readonly string[] }>;
  sources: () => Map<string, SourceInfo>;
  minDurationMs: number;
  /** Wakes the outbox sender. */
  onQueued: () => void;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
}

export class GapAnnotator {
  private timer: NodeJS.Timeout | null = null;
  private readonly throttle: LogThrottle;
  createdTotal = 0;

  constructor(private readonly o: GapAnnotatorOptions) {
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
  }

  start(): void {
    this.run();
    this.timer = setInterval(() => this.run(), POLL_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Annotates every gap that qualifies now. Returns how many annotations were queued. */
  run(): number {
    let queued = 0;
    try {
      for (const gap of this.o.ledger.annotatable(this.o.minDurationMs)) queued += this.annotate(gap);
    } catch (err) {
      // Tried every POLL_MS; a full outbox or disk says so once a minute, not at every try.
      this.throttle.warn('failed', { err: describeError(err) }, 'gap annotations not created now; retried shortly');
    }
    if (queued > 0) this.o.onQueued();
    return queued;
  }

  private annotate(gap: GapRow): number {
    const now = this.o.clock.now();
    const info = this.o.sources().get(gap.source);
    const variables = [...new Set(gap.variables ?? info?.variables ?? [])];
    const parts: string[][] = [];
    for (let i = 0; i < variables.length; i += MAX_MACHINE_VARIABLES) parts.push(variables.slice(i, i + MAX_MACHINE_VARIABLES));
    if (parts.length === 0) parts.push([]);
    const text = this.text(gap, variables, info?.kind);
    const annotations: NewAnnotation[] = parts.map((mv, i) => ({
      type: 'range',
      occurredAt: null,
      startedAt: gap.from,
      // §2.3: ended_at must be after started_at.
      endedAt: Math.max(gap.to!, gap.from + 1),
      text: parts.length > 1 ? `${text} (part ${i + 1} of ${parts.length})` : text,
      machineVariables: mv,
      site: this.o.site,
      machine: null,
      externalId: gapExternalId(this.o.gatewayName, gap, i),
      origin: 'gap',
    }));
    const done = this.o.ledger.annotate(gap.id, annotations.map((a) => a.externalId), now, () => {
      for (const a of annotations) this.o.store.insert(a, now);
    });
    if (!done) return 0;
    this.createdTotal += annotations.length;
    this.o.metrics.annotationsCreated.inc({ origin: 'gap' }, annotations.length);
    this.o.logger.info({ gap_id: gap.id, source: gap.source, reason: gap.reason, annotations: annotations.length, external_ids: annotations.map((a) => a.externalId) }, `gap annotated: ${text}`);
    return annotations.length;
  }

  private text(gap: GapRow, variables: readonly string[], kind: string | undefined): string {
    // The configured machines the variables belong to ("Press 1"), else the source's name.
    const names = new Set<string>();
    for (const v of variables) {
      const m = this.o.machines.find((x) => x.machine_variables.includes(v));
      if (m) names.add(m.name ?? m.key);
    }
    const who = names.size > 0 ? [...names].join(', ') : gap.source;
    const device = gap.scope.startsWith('device:') ? `, device ${gap.scope.slice(7)}` : '';
    let text = `No data from ${who} (${kindLabel(kind)}${device}): ${REASON_TEXT[gap.reason] ?? gap.reason}`;
    if (gap.filled === 'partial') text += `; partly filled from the server's history${gap.note ? ` (${gap.note})` : ''}`;
    return text.slice(0, MAX_TEXT_CHARS);
  }
}

/** `<gateway>-gap-<12 hex of source|scope|reason>-<from base36>-<part>`: stable, §2.1 alphabet, ≤ 100 chars. */
export function gapExternalId(gatewayName: string, gap: Pick<GapRow, 'source' | 'scope' | 'reason' | 'from'>, part: number): string {
  const h = createHash('sha256').update(`${gap.source}|${gap.scope}|${gap.reason}`).digest('hex').slice(0, 12);
  const id = `${gatewayName}-gap-${h}-${gap.from.toString(36)}-${part}`;
  if (id.length > MAX_EXTERNAL_ID_CHARS || !EXTERNAL_ID_PATTERN.test(id)) throw new Error(`generated external_id ${JSON.stringify(id)} breaks §2.1`);
  return id;
}
