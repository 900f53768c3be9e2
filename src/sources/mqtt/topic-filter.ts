/**
 * MQTT topic filters: validation, matching and overlap, per MQTT 3.1.1 §4.7 (same rules in
 * MQTT 5 §4.7).
 *
 * - `+` matches exactly one level and must occupy a whole level (§4.7.1.3).
 * - `#` matches the parent level and any number of child levels; it must be the last level and
 *   occupy it alone (§4.7.1.2).
 * - Filters starting with a wildcard do not match topics starting with `$` (§4.7.2).
 */

/** Returns a problem in plain words, or null when `filter` is a valid topic filter. */
export function topicFilterProblem(filter: string): string | null {
  if (filter.length === 0) return 'must not be empty';
  if (Buffer.byteLength(filter, 'utf8') > 65_535) return 'is longer than 65,535 bytes (MQTT §1.5.3)';
  if (filter.includes('\u0000')) return 'must not contain the null character (MQTT §1.5.3)';
  const levels = filter.split('/');
  for (let i = 0; i < levels.length; i++) {
    const level = levels[i];
    if (level.includes('#')) {
      if (level !== '#') return `"#" must take a whole level (level ${i} is "${level}")`;
      if (i !== levels.length - 1) return '"#" must be the last level';
    }
    if (level.includes('+') && level !== '+') return `"+" must take a whole level (level ${i} is "${level}")`;
  }
  return null;
}

/** Returns a problem when `topic` cannot be a topic name a publisher uses (no wildcards). */
export function topicNameProblem(topic: string): string | null {
  if (topic.length === 0) return 'must not be empty';
  if (topic.includes('+') || topic.includes('#')) return 'must not contain the wildcards "+" or "#"';
  return null;
}

/** True when the topic name matches the filter (MQTT §4.7). */
export function topicMatches(filter: string, topic: string): boolean {
  return matchLevels(filter.split('/'), topic.split('/'), topic.startsWith('$'));
}

function matchLevels(f: string[], t: string[], dollar: boolean): boolean {
  // §4.7.2: a filter beginning with a wildcard does not match a topic beginning with "$".
  if (dollar && (f[0] === '+' || f[0] === '#')) return false;
  for (let i = 0; i < f.length; i++) {
    const level = f[i];
    if (level === '#') return true; // also matches the parent level: "a/#" matches "a"
    if (i >= t.length) return false;
    if (level !== '+' && level !== t[i]) return false;
  }
  return f.length === t.length;
}

/**
 * True when some topic name would match both filters. Used to refuse overlapping subscriptions on
 * one connection: a broker may deliver a message matching two subscriptions once or twice
 * (MQTT 3.1.1 §3.3.5), so overlapping filters would count a value twice or not predictably.
 */
export function filtersOverlap(a: string, b: string): boolean {
  const x = a.split('/');
  const y = b.split('/');
  const n = Math.max(x.length, y.length);
  for (let i = 0; i < n; i++) {
    const p = x[i];
    const q = y[i];
    if (p === '#' || q === '#') return true;
    if (p === undefined || q === undefined) return false;
    if (p === '+' || q === '+') continue;
    if (p !== q) return false;
  }
  return true;
}

/** Compiled filter for fast matching of many messages. */
export class TopicFilter {
  readonly levels: readonly string[];
  readonly hasWildcard: boolean;

  constructor(readonly filter: string) {
    this.levels = filter.split('/');
    this.hasWildcard = this.levels.some((l) => l === '+' || l === '#');
  }

  matches(topic: string): boolean {
    if (!this.hasWildcard) return topic === this.filter;
    return matchLevels(this.levels as string[], topic.split('/'), topic.startsWith('$'));
  }

  /** True when level `index` of the filter is a wildcard (so it can select a variable). */
  isWildcardLevel(index: number): boolean {
    const l = this.levels[Math.min(index, this.levels.length - 1)];
    return index >= this.levels.length ? this.levels[this.levels.length - 1] === '#' : l === '+' || l === '#';
  }
}
