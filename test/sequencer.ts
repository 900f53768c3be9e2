import { statSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Longest files first, so the two workers finish together instead of one of them running the
 * container build or a bench smoke file alone at the end.
 *
 * vitest's own order puts failed files first, then the longest by its results cache, and on a fresh
 * clone (no cache, as in CI) the largest files first; the slowest files here are small ones (the
 * container check is 70 lines and builds an image for minutes; a smoke file is 5 lines and runs a
 * third of the benches), so a fresh clone ran them last, one worker idle meanwhile. Each file gets
 * an estimate instead: the figure below for the files known to be slow, else its last duration
 * from the cache, else one guessed from its size. Estimates only order the files;
 * a wrong one costs time, never a result.
 */

/** Seconds, from runs of the whole suite on the 2-core CI machine (2026-11-28 fresh clone); the first pattern that matches counts. */
const KNOWN_SLOW_S: ReadonlyArray<readonly [RegExp, number]> = [
  [/^test\/container\//, 300],
  [/^test\/uplink\/service-rate\.test\.ts$/, 260],
  [/^test\/bench\/smoke-\d+\.test\.ts$/, 150],
  [/^test\/uplink\/backfill\.test\.ts$/, 100],
  [/^test\/console\/trend-restart\.chromium\.test\.ts$/, 60],
  [/^test\/sources\/opcua\/(recovery|history)\.test\.ts$/, 60],
  [/^test\/runtime\/gaps\.test\.ts$/, 55],
  [/^test\/fleet\/duplicate-name\.test\.ts$/, 45],
  [/\.chromium\.test\.ts$/, 40],
];

/** A file of unknown duration: about a second per kB of test code (the suite's median). */
const SECONDS_PER_BYTE = 1 / 1000;

/**
 * The estimate for the file at `absolute` (`path` from the root): the table first (a container check
 * skipped outside CI leaves a cached duration of nothing), then the cache, then the size.
 */
export function estimateS(path: string, absolute: string, cachedMs: number | undefined): number {
  const known = KNOWN_SLOW_S.find(([re]) => re.test(path));
  if (known) return known[1];
  if (cachedMs !== undefined) return cachedMs / 1000;
  const size = statSync(absolute, { throwIfNoEntry: false })?.size ?? 0;
  return size * SECONDS_PER_BYTE;
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const cache = this.ctx.cache;
    const keyed = files.map((spec) => {
      const path = relative(root, spec.moduleId).split('\\').join('/');
      const cached = cache.getFileTestResults(`${spec.project.name}:${path}`);
      return { spec, failed: cached?.failed === true, estimate: estimateS(path, spec.moduleId, cached?.duration) };
    });
    // A file that failed last time runs first (vitest's own rule: its answer comes soonest).
    keyed.sort((a, b) => Number(b.failed) - Number(a.failed) || b.estimate - a.estimate);
    return keyed.map((k) => k.spec);
  }
}
