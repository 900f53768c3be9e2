import { setFlagsFromString } from 'node:v8';

/**
 * V8 settings that keep a long-running gateway's RSS near its live memory (bench/memory.ts:
 * target 150 MB with a 20 M-sample backlog and 5,000 live variables). Set at start-up with
 * v8.setFlagsFromString because NODE_OPTIONS does not accept them; each is read by V8 when it is
 * used (at every full GC, when a WebAssembly module is compiled), and both uses come after start-up.
 *
 *  --heap-growing-percent=50: a full GC once the old generation has grown by half of what
 *    survived the last one (at least 8 MB). Without it V8 picks the factor from the host's memory,
 *    up to 4× on a host with more than a few GB, and with ~25 MB live the gateway's old generation
 *    swung between 25 and ~100 MB (--trace-gc: "Mark-Compact 97.2 -> 25.2 MB" every 10-15 s; RSS
 *    followed it). The young generation is small on purpose (--max-semi-space-size=2, Dockerfile),
 *    so whatever lives a few milliseconds (a commit's samples, a sync batch) is promoted and dies in
 *    the old generation. At 50 % a full GC comes every few seconds and costs a few milliseconds of
 *    incremental marking. Unlike --max-old-space-size it sets no ceiling: a heap that needs to grow
 *    still can.
 *  --no-wasm-tier-up --no-wasm-dynamic-tiering: undici parses HTTP responses with llhttp compiled
 *    to WebAssembly. Once the sync path gets busy, V8 recompiled that parser with its optimizing
 *    compiler on a worker thread, which took ~35 MB of malloc for 0.1-0.3 s (perf on mprotect:
 *    a worker's arena grew by 33-36 MB inside V8's wasm BackgroundCompileJob), RSS +30 MB at the
 *    first uploads after an outage. The baseline (Liftoff) code parses the service's small
 *    responses fast enough.
 */
export const V8_MEMORY_FLAGS = ['--heap-growing-percent=50', '--no-wasm-tier-up', '--no-wasm-dynamic-tiering'] as const;

/** The flag's name without dashes, `no-` or value, `_` as `-`: `--no-wasm-tier-up` → `wasm-tier-up`. */
function flagName(flag: string): string {
  return flag
    .replace(/^--?/, '')
    .replace(/=.*$/, '')
    .replace(/_/g, '-')
    .replace(/^no-/, '');
}

/**
 * Applies V8_MEMORY_FLAGS to this process (the gateway's long-running commands, before anything
 * compiles llhttp). A flag given on node's own command line (`node --heap-growing-percent=100
 * dist/cli.js run`) is left as given.
 */
export function applyV8MemoryFlags(execArgv: readonly string[] = process.execArgv): string[] {
  const given = new Set(execArgv.map(flagName));
  const applied = V8_MEMORY_FLAGS.filter((f) => !given.has(flagName(f)));
  for (const f of applied) setFlagsFromString(f);
  return applied;
}
