/**
 * Benchmark: what the commissioning console costs the gateway. Two gateways in the same run, one
 * after the other, each the compiled CLI in its own process with 5,000 variables at 1 Hz delivered
 * to the emulator (its own process):
 *   baseline  http.console: false (no value ring, no console routes), nobody watching;
 *   console   http.console: true and one console open: the page's requests (the variable list at
 *             the start, the overview every 10 s) and its live stream (one event a second with
 *             every changed variable), read to the end like a browser does.
 * Targets: extra CPU <= 5 % of one core, extra RSS <= 30 MB.
 *
 *   npm run build && npx tsx bench/console-cost.ts
 *   BENCH_SECONDS=30 npx tsx bench/console-cost.ts      # quicker
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createParser } from 'eventsource-parser';
import { cpuSecondsOf, envNumber, freePort, mb, NOISY_MACHINE_NOTE, rssSampler, SMOKE, smokeBanner, startEmulatorProcess, startGatewayProcess, table, verdict } from './lib.js';

const LIVE = envNumber('BENCH_LIVE', 5_000, 200);
const SECONDS = envNumber('BENCH_SECONDS', 60, 3);
const WARMUP_S = SMOKE ? 2 : 15;
/** The console's page loaded and its stream open this long before the window. */
const CONSOLE_SETTLE_MS = SMOKE ? 1_000 : 3_000;
smokeBanner(`BENCH_LIVE ${LIVE}, BENCH_SECONDS ${SECONDS}, warm-up ${WARMUP_S} s`);

const { DEMO_FIXTURE } = await import('../src/emulator/demo-fixture.js');
const liveVars = Array.from({ length: LIVE }, (_, i) => `mvr_live_${i + 1}`);
const fixture = { ...DEMO_FIXTURE, machine_variables: [...DEMO_FIXTURE.machine_variables, ...liveVars.map((id) => ({ id, name: id, machine: 'mch_gen1', unit: '' }))] };

const root = mkdtempSync(join(tmpdir(), 'gw-bench-console-'));
const emu = await startEmulatorProcess({ port: await freePort(), dir: root, fixture });

interface Run {
  cpuPct: number;
  rssMb: number;
  peakMb: number;
  events: number;
  bytesPerS: number;
}

async function run(name: string, withConsole: boolean): Promise<Run> {
  const dir = join(root, name);
  const httpPort = await freePort();
  const gw = await startGatewayProcess(
    {
      gateway: { name, data_dir: join(dir, 'data'), status_interval: 0 },
      log: { level: 'info', format: 'json' },
      service: { base_url: `${emu.base}/tracking/v1`, auth_url: emu.base, organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' } },
      buffer: { path: join(dir, 'buffer.db') },
      http: { enabled: true, port: httpPort, console: withConsole },
      generator: [{ name: 'live', variables: { prefix: 'mvr_live_', count: LIVE }, interval: '1s', shape: 'random_walk' }],
    },
    root,
  );
  const base = `http://127.0.0.1:${httpPort}`;
  const abort = new AbortController();
  let events = 0;
  let bytes = 0;
  let overview: NodeJS.Timeout | null = null;
  try {
    await new Promise((r) => setTimeout(r, WARMUP_S * 1_000)); // every variable seen, JIT warm
    if (withConsole) {
      // What one open console asks for: page, bundle, variable list, overview, live stream.
      for (const p of ['/console', '/console/app.js', '/console/app.css', '/console/api/variables', '/console/api/overview']) await (await fetch(base + p)).arrayBuffer();
      overview = setInterval(() => void fetch(`${base}/console/api/overview`).then((r) => r.arrayBuffer()).catch(() => undefined), 10_000);
      const res = await fetch(`${base}/console/api/events`, { signal: abort.signal });
      // Counted with a kept SSE parser: a frame split across two network chunks is one tick, not zero.
      const parser = createParser({ onEvent: (e) => void (e.event === 'tick' && (events += 1)) });
      const decoder = new TextDecoder();
      void (async () => {
        try {
          for await (const chunk of res.body!) {
            bytes += (chunk as Uint8Array).length;
            parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
          }
        } catch {
          /* aborted at the end */
        }
      })();
      await new Promise((r) => setTimeout(r, CONSOLE_SETTLE_MS));
    }
    const pid = gw.child.pid!;
    const cpu0 = cpuSecondsOf(pid);
    const t0 = performance.now();
    const rss = rssSampler(pid, 250);
    const events0 = events;
    const bytes0 = bytes;
    await new Promise((r) => setTimeout(r, SECONDS * 1_000));
    const wall = (performance.now() - t0) / 1000;
    const cpu = cpuSecondsOf(pid) - cpu0;
    const { peak, samples } = rss.stop();
    const avg = samples.reduce((a, b) => a + b, 0) / samples.length;
    return { cpuPct: (100 * cpu) / wall, rssMb: mb(avg), peakMb: mb(peak), events: events - events0, bytesPerS: Math.round((bytes - bytes0) / wall) };
  } finally {
    if (overview) clearInterval(overview);
    abort.abort();
    await gw.stop();
  }
}

try {
  process.stdout.write(`${LIVE.toLocaleString('en-US')} variables at 1 Hz, ${SECONDS} s measured per gateway after ${WARMUP_S} s of warm-up\n`);
  const baseline = await run('baseline', false);
  const withConsole = await run('console', true);
  const extraCpu = withConsole.cpuPct - baseline.cpuPct;
  const extraRss = withConsole.rssMb - baseline.rssMb;
  process.stdout.write(
    `\n${table([
      { gateway: 'baseline (console off)', 'CPU % of a core': baseline.cpuPct, 'RSS avg MB': baseline.rssMb, 'RSS peak MB': baseline.peakMb, 'live events': '-', 'stream B/s': '-' },
      { gateway: 'console open', 'CPU % of a core': withConsole.cpuPct, 'RSS avg MB': withConsole.rssMb, 'RSS peak MB': withConsole.peakMb, 'live events': withConsole.events, 'stream B/s': withConsole.bytesPerS },
    ])}\n\n`,
  );
  // A window too short for a clock tick of the baseline's CPU has no CPU ratio.
  const cpuRatio = baseline.cpuPct > 0 ? `${(withConsole.cpuPct / baseline.cpuPct).toFixed(2)}x` : 'n/a (the baseline used no measurable CPU in the window)';
  process.stdout.write(`ratio CPU ${cpuRatio}, RSS ${(withConsole.rssMb / baseline.rssMb).toFixed(2)}x\n`);
  process.stdout.write(`${verdict(extraCpu <= 5, `extra CPU ${extraCpu.toFixed(2)} % of one core (target <= 5 %)`)}\n`);
  process.stdout.write(`${verdict(extraRss <= 30, `extra RSS ${extraRss.toFixed(1)} MB (target <= 30 MB)`)}\n`);
  process.stdout.write(`${NOISY_MACHINE_NOTE}\n`);
} finally {
  await emu.stop();
  rmSync(root, { recursive: true, force: true });
}
