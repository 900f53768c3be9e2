import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  BENCH_DIR,
  benchSource,
  listBenches,
  missingSmokeMode,
  NON_BENCH_MODULES,
  PEER_MISSING_EXIT,
  peerMissing,
  runSmoke,
  shardOf,
  SMOKE_BANNER,
  smokeProblems,
  staleNonBenchEntries,
} from '../helpers/bench-smoke.js';
import { SMOKE_SHARDS } from './shards.js';

/** What the smoke files (smoke-*.test.ts) rely on: every bench found once, and a checker that fails what it must. */
describe('benchmark smoke runs: discovery and checks', () => {
  it('finds every bench in bench/ and spreads each over exactly one smoke file', () => {
    const benches = listBenches();
    expect(benches.length).toBeGreaterThan(20);
    for (const helper of Object.keys(NON_BENCH_MODULES)) expect(benches).not.toContain(helper);
    const spread = Array.from({ length: SMOKE_SHARDS }, (_, k) => shardOf(k, SMOKE_SHARDS)).flat().sort();
    expect(spread).toEqual(benches);
  });

  it('lists only non-bench modules that exist', () => {
    expect(staleNonBenchEntries()).toEqual([]);
  });

  it('looks for the banner and the exit code bench/lib.ts uses', () => {
    const lib = benchSource('lib.ts');
    expect(lib).toContain(`SMOKE_BANNER = '${SMOKE_BANNER}'`);
    expect(lib).toContain(`PEER_MISSING_EXIT = ${PEER_MISSING_EXIT}`);
  });

  it('every bench has a smoke mode', () => {
    const missing = listBenches()
      .map((f) => missingSmokeMode(f, benchSource(f)))
      .filter(Boolean);
    expect(missing).toEqual([]);
  });

  it('names a bench without a smoke mode and says what to do', () => {
    const why = missingSmokeMode('new-bench.ts', "const N = Number(process.env.BENCH_SAMPLES ?? 1_000_000);\nconsole.log(table(rows));\n");
    expect(why).toContain('bench/new-bench.ts has no smoke mode');
    expect(why).toContain('BENCH_SMOKE=1');
    expect(why).toContain('NON_BENCH_MODULES');
  });

  const good = [
    'BENCH_SMOKE=1: smallest sizes (BENCH_SAMPLES 20,000).',
    '| path     | samples/s |',
    '|----------|-----------|',
    '| baseline | 52,207    |',
    '| gateway  | 55,539    |',
    'ratio gateway / baseline = 1.06',
    'FAIL  >= 500,000 samples/s (55,539)',
  ].join('\n');
  const withVerdicts = "console.log(verdict(ok, 'x'));";

  it('passes a run that prints its table, ratio and verdicts, whatever the verdicts say', () => {
    expect(smokeProblems(withVerdicts, { code: 0, signal: null, stdout: good })).toEqual([]);
  });

  it('fails a crash, a missing banner, table, ratio or verdict, and figures that were not measured', () => {
    const problems = (stdout: string, code = 0, source = withVerdicts) => smokeProblems(source, { code, signal: null, stdout }).join('\n');
    expect(problems(good, 1)).toContain('exited with 1');
    expect(problems(good.replace('BENCH_SMOKE=1: smallest sizes', 'sizes'))).toContain('did not announce its smoke sizes');
    expect(problems(good.replace('|----------|-----------|\n', ''))).toContain('no table');
    expect(problems(good.replace('ratio gateway / baseline = 1.06', ''))).toContain('no ratio');
    expect(problems(good.replace('FAIL  >= 500,000', 'at least 500,000'))).toContain('no verdict line');
    // A bench without targets prints no verdicts and is not asked for one.
    expect(problems(good.replace('FAIL  >= 500,000', 'at least 500,000'), 0, 'console.log(table(rows));')).toBe('');
    for (const bad of ['NaN', 'null', 'undefined', 'Infinity', '∞']) expect(problems(good.replace('55,539    |', `${bad} |`))).toContain('not measured');
  });
});

describe('benchmark smoke runs: the runner, on a bench of its own', () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-smoke-runner-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const bench = (name: string, body: string) => {
    const path = join(dir, name);
    writeFileSync(path, `import { envNumber, requirePeer, smokeBanner, table, verdict } from ${JSON.stringify(join(BENCH_DIR, 'lib.js'))};\n${body}\n`);
    return path;
  };

  it('runs it with BENCH_SMOKE=1 and its smoke sizes, not the size a developer exported', async () => {
    process.env.BENCH_SAMPLES = '5000000';
    try {
      const path = bench(
        'sizes.ts',
        `const n = envNumber('BENCH_SAMPLES', 1_000_000, 20);
smokeBanner(\`BENCH_SAMPLES \${n}\`);
console.log(table([{ side: 'baseline', n }, { side: 'gateway', n }]));
console.log('ratio gateway / baseline = 1.00');
console.log(verdict(n === 20, 'smoke size'));`,
      );
      const run = await runSmoke(path, 120_000);
      expect(run.stderr).toBe('');
      expect(run.stdout).toContain(`${SMOKE_BANNER} BENCH_SAMPLES 20.`);
      expect(run.stdout).toContain('PASS  smoke size');
      expect(smokeProblems('verdict(', run)).toEqual([]);
    } finally {
      delete process.env.BENCH_SAMPLES;
    }
  });

  it('tells a missing peer (skipped, or failed under CI) from a crash', async () => {
    const missing = await runSmoke(bench('peer.ts', "smokeBanner('none');\nrequirePeer(false, '/usr/sbin/nothing is missing');\nconsole.log('not reached');"), 120_000);
    expect(missing.code).toBe(PEER_MISSING_EXIT);
    expect(peerMissing(missing)).toBe('SKIPPED: /usr/sbin/nothing is missing');
    expect(missing.stdout).not.toContain('not reached');

    const crash = await runSmoke(bench('crash.ts', "smokeBanner('none');\nconst figure: { x: number } | null = null;\nconsole.log(figure!.x.toFixed(1));"), 120_000);
    expect(peerMissing(crash)).toBeNull();
    expect(smokeProblems('', crash).join('\n')).toContain('exited with 1');
    expect(crash.stderr).toContain('TypeError');
  });
});
