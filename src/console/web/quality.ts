import { throughLink, type Quality, type QualityReading } from '../../core/quality.js';
import type { GatewayStatus } from '../api/live.js';
import type { VariableRow } from '../api/variables.js';

/**
 * A row's quality as the page shows it: what its source stored (the list, then the live stream's
 * `q`), seen through its link as the status says (core/quality.ts `throughLink`). The status
 * comes every second, so a source that goes down makes every one of its variables stale at once,
 * from the time the transport reported the loss, without a message per variable.
 */
export function qualityOf(v: Pick<VariableRow, 'quality' | 'quality_since' | 'source' | 'device'>, links: LinkDown): QualityReading {
  return throughLink(v.quality, v.quality_since, links(v));
}

/** Only the quality `qualityOf` gives, without its since and without allocating: for counting and filtering thousands of rows each second. */
export function shownQuality(v: Pick<VariableRow, 'quality' | 'source' | 'device'>, links: LinkDown): Quality {
  return v.quality === 'none' || links(v) === null ? v.quality : 'stale';
}

/** Since when the link a row follows is down (its source's, or its device's), null while up or unknown. */
export type LinkDown = (v: Pick<VariableRow, 'source' | 'device'>) => number | null;

/** The links of a status, looked up once per render for thousands of rows. */
export function linksOf(status: GatewayStatus | null): LinkDown {
  const bySource = new Map<string, { down: number | null; devices: Map<string, number | null> }>();
  for (const s of status?.sources ?? []) {
    const devices = new Map<string, number | null>();
    const list = s.detail?.devices;
    if (Array.isArray(list)) for (const d of list as Array<{ name?: unknown; down_since?: unknown }>) if (typeof d.name === 'string') devices.set(d.name, typeof d.down_since === 'number' ? d.down_since : null);
    bySource.set(s.name, { down: s.downSince ?? null, devices });
  }
  return (v) => {
    const s = v.source === null ? undefined : bySource.get(v.source);
    if (!s) return null;
    return s.down ?? (v.device === null ? null : (s.devices.get(v.device) ?? null));
  };
}

/** Words for a quality, as the filter buttons and pills say it. */
export const QUALITY_LABEL: Record<Quality, string> = { good: 'Good', uncertain: 'Uncertain', bad: 'Bad', stale: 'Stale', none: 'No value yet' };

/** Pill colour of a quality. */
export const QUALITY_CLASS: Record<Quality, 'ok' | 'warn' | 'bad' | 'off'> = { good: 'ok', uncertain: 'warn', bad: 'bad', stale: 'warn', none: 'off' };

/**
 * What happens upstream to a value of each quality, as documented (README "Quality of values",
 * the OPC UA and MQTT READMEs): the console says it next to the values.
 */
export const QUALITY_UPSTREAM: Record<Quality, string> = {
  good: 'Sent to the tracking service.',
  uncertain: 'Sent to the tracking service unless the source refuses uncertain values (OPC UA: uncertain: refuse; a Sparkplug or MQTT Quality below 192 is always refused, counted as uncertain_status).',
  bad: 'Never sent: refused and counted (bad_status, or the refusal reason shown). The value shown is the last good one.',
  stale: 'Nothing new arrives: the value shown is the last one read, already sent; nothing is sent for the time it is stale.',
  none: 'No value has been read since the gateway started.',
};
