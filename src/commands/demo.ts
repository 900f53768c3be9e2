import { fileURLToPath } from 'node:url';
import { loadConfigFile } from '../config/load.js';
import { DEMO_CLIENT_SECRET } from '../emulator/demo-fixture.js';
import { startEmulator } from '../emulator/index.js';
import { runUntilSignal } from '../runtime/run.js';
import { parseFlags } from './flags.js';

const DEFAULT_CONFIG = fileURLToPath(new URL('../../config/demo.yaml', import.meta.url));

const HELP = `Usage: edge-gateway demo [--config FILE]

Starts the built-in tracking-service emulator, the simulated plant and the gateway together, with
no outside services, and prints a status line every few seconds. Ctrl-C stops everything.

Options:
  -c, --config FILE   demo configuration (default: config/demo.yaml of this package)
  -h, --help          show this help`;

export async function demoCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(argv, { config: { type: 'string', short: 'c' } }, HELP);
  if (!parsed) return 0;
  // The emulator's lab credential; a real deployment gets its secret from the environment.
  process.env.GATEWAY_CLIENT_SECRET ??= DEMO_CLIENT_SECRET;
  const loaded = loadConfigFile(parsed.values.config ?? DEFAULT_CONFIG);
  const config = loaded.config;
  const base = new URL(config.service.base_url);
  let emulator;
  try {
    emulator = await startEmulator({ host: base.hostname, port: Number(base.port || 80) });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      process.stderr.write(`edge-gateway demo: port ${base.port} is in use (is another demo running?). Stop it, or copy config/demo.yaml and change service.base_url and auth_url.\n`);
      return 1;
    }
    throw err;
  }
  const closers: Array<() => Promise<void>> = [];
  const running = await runUntilSignal(config, {
    extraClose: async () => {
      for (const c of closers.reverse()) await c().catch(() => undefined);
      await emulator.close();
    },
  });
  const http = running.handle.httpUrl;
  process.stdout.write(
    [
      '',
      'Edge gateway demo',
      `  tracking-service emulator  ${emulator.baseUrl}   (inspect: ${emulator.baseUrl.replace(/\/tracking\/v1$/, '')}/_emulator/stats)`,
      http ? `  gateway status             ${http}/status   (metrics: ${http}/metrics)` : '',
      '  Ctrl-C stops everything.',
      '',
    ]
      .filter(Boolean)
      .join('\n') + '\n',
  );
  await running.done;
  return 0;
}
