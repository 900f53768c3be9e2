import { h } from 'preact';
import type { Quality, QualitySummary } from '../../core/quality.js';
import { fmtNum } from '../../web/format.js';
import { openVariables } from './page-variables.js';
import { QUALITY_CLASS } from './quality.js';

const ORDER: Quality[] = ['good', 'uncertain', 'bad', 'stale', 'none'];

/**
 * A source's (or device's) variables by quality, as /status counts them: each count opens the
 * Variables page on that quality and source.
 */
export function QualityCounts({ v, source, testid }: { v: QualitySummary | null | undefined; source: string; testid?: string }) {
  if (!v || v.total === 0) return <span class="muted">–</span>;
  return (
    <span class="qcounts" data-testid={testid}>
      {ORDER.filter((q) => v[q] > 0).map((q) => (
        <button class={`pill small ${QUALITY_CLASS[q]}`} title={`Show the ${q === 'none' ? 'variables without a value yet' : `${q} variables`} of ${source}`} onClick={() => openVariables({ filter: q, source })}>
          {fmtNum(v[q])} {q === 'none' ? 'no value' : q}
        </button>
      ))}
    </span>
  );
}
