import { loadConfigFile } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { systemClock } from '../core/clock.js';
import { silentLogger } from '../core/logger.js';
import { createMetrics } from '../core/metrics.js';
import { SourceStats, type SourceKind } from '../core/source.js';
import { buildSources } from '../sources/registry.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage: edge-gateway check --config FILE

Validates the configuration and prints a summary, without connecting to anything. Every problem is
named by its setting and value. Exit code 0 when valid, 2 when not.

Options:
  -c, --config FILE   configuration file (YAML or JSON); default $GATEWAY_CONFIG
  -h, --help          show this help`;

export async function checkCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(argv, { config: { type: 'string', short: 'c' } }, HELP);
  if (!parsed) return 0;
  const file = parsed.values.config ?? process.env.GATEWAY_CONFIG;
  if (!file) throw new UsageError(`--config FILE is required (or set GATEWAY_CONFIG)\n\n${HELP}`);
  const loaded = loadConfigFile(file);
  // Factories run without I/O, so cross-field problems (duplicate names, register overlaps) show here too.
  const metrics = createMetrics();
  const sources = await buildSources(loaded.config, (name: string, kind: SourceKind) => ({
    sink: { append: async () => undefined },
    logger: silentLogger(),
    stats: new SourceStats(name, kind, metrics, systemClock),
    metrics,
    clock: systemClock,
    dataDir: '/nonexistent',
  }));
  process.stdout.write(`${loaded.path}: configuration is valid\n\n${summary(loaded.config, sources.map((s) => `${s.kind}:${s.name}`))}`);
  for (const w of loaded.warnings) process.stdout.write(`warning: ${w}\n`);
  return 0;
}

export function summary(c: GatewayConfig, sources: string[]): string {
  const auth = c.service.auth;
  const credential = auth.mode === 'client_credentials' ? `client ${auth.client_id}, secret from ${auth.client_secret.origin}` : `API key from ${auth.api_key.origin}${auth.secondary_api_key ? `, secondary from ${auth.secondary_api_key.origin}` : ''}`;
  const lines = [
    `gateway        ${c.gateway.name} (data in ${c.gateway.data_dir})`,
    `service        ${c.service.base_url}`,
    `organisation   ${c.service.organisation_id}`,
    `credentials    ${auth.mode}: ${credential}`,
    `item id field  ${c.service.item_id_field}`,
    `uplink         ${c.uplink.requests_per_minute} requests/min, batches of ${c.uplink.batch_size}, flush ${c.uplink.flush_interval} ms, ${c.uplink.max_in_flight} in flight`,
    `backfill       ${c.uplink.backfill.enabled ? `import jobs beyond ${Math.round(c.uplink.backfill.threshold / 1000)} s of backlog, files up to ${c.uplink.backfill.max_file_bytes.toLocaleString('en-US')} bytes` : 'off'}`,
    `buffer         ${c.buffer.path} (max ${c.buffer.max_bytes.toLocaleString('en-US')} bytes, when full: ${c.buffer.when_full}, commit every ${c.buffer.commit_interval} ms, synchronous ${c.buffer.synchronous})`,
    `http           ${c.http.enabled ? `${c.http.host}:${c.http.port}${c.http.api_token ? ' (api token set)' : ''}` : 'off'}`,
    `sources        ${sources.length === 0 ? 'none' : sources.join(', ')}`,
  ];
  return `${lines.join('\n')}\n`;
}
