import { loadConfigFile } from '../config/load.js';
import { runUntilSignal } from '../runtime/run.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage: edge-gateway run --config FILE

Runs the gateway until SIGINT or SIGTERM (graceful stop within 10 s). SIGHUP, or saving the
configuration file, reloads sources and annotations without a restart; an invalid file is
refused and the running configuration kept (the reason is logged).

Options:
  -c, --config FILE   configuration file (YAML or JSON); default $GATEWAY_CONFIG
  -h, --help          show this help`;

export async function runCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(argv, { config: { type: 'string', short: 'c' } }, HELP);
  if (!parsed) return 0;
  const file = parsed.values.config ?? process.env.GATEWAY_CONFIG;
  if (!file) throw new UsageError(`--config FILE is required (or set GATEWAY_CONFIG)\n\n${HELP}`);
  const loaded = loadConfigFile(file);
  const running = await runUntilSignal(loaded.config, { configPath: loaded.path });
  for (const w of loaded.warnings) running.handle.logger.warn({ config: loaded.path }, w);
  await running.done;
  return 0;
}
