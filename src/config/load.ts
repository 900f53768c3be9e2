import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseDocument, YAMLParseError } from 'yaml';
import { ConfigError } from '../core/errors.js';
import { formatIssues } from './issues.js';
import { withoutRequiredSecrets } from './secrets.js';
import { isLoopbackHost } from '../http/guard.js';
import { gatewaySchema, type GatewayConfig } from './schema.js';

export interface LoadedConfig {
  config: GatewayConfig;
  /** Absolute path of the file it came from, or null for an in-memory config. */
  path: string | null;
  /** Things that are allowed but probably wrong (a secret written in the file, a budget above the service limit). */
  warnings: string[];
}

/**
 * Reads, parses and validates a YAML (or JSON) config file. Throws `ConfigError` naming every problem.
 * With `requireSecrets: false`, secrets that cannot be resolved (variable not set) are accepted as
 * empty: for commands that only need paths and ports from the file.
 */
export function loadConfigFile(file: string, options: { requireSecrets?: boolean } = {}): LoadedConfig {
  if (options.requireSecrets === false) return withoutRequiredSecrets(() => loadConfigFile(file));
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new ConfigError([`config file ${path} cannot be read (${code})`], { cause: err });
  }
  return { ...parseConfigText(text, path), path };
}

export function parseConfigText(text: string, origin = 'config'): Omit<LoadedConfig, 'path'> {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(doc.errors.map((e: YAMLParseError) => `${origin}: YAML syntax error at line ${e.linePos?.[0]?.line ?? '?'}, column ${e.linePos?.[0]?.col ?? '?'}: ${e.message.split('\n')[0]}`));
  }
  const raw: unknown = doc.toJS() ?? {};
  return validateConfig(raw);
}

/** Validates an already-parsed config object (tests build configs in code and use this). */
export function validateConfig(raw: unknown): Omit<LoadedConfig, 'path'> {
  const result = gatewaySchema.safeParse(raw, { reportInput: true });
  if (!result.success) throw new ConfigError(formatIssues(result.error.issues, [], gatewaySchema));
  return { config: result.data, warnings: warningsFor(result.data) };
}

function warningsFor(config: GatewayConfig): string[] {
  const warnings: string[] = [];
  const auth = config.service.auth;
  const secret = auth.mode === 'client_credentials' ? auth.client_secret : auth.api_key;
  if (secret.origin === 'config file') {
    warnings.push(`service.auth: the ${auth.mode === 'client_credentials' ? 'client_secret' : 'api_key'} is written in the config file; prefer {env: NAME} or {file: PATH}`);
  }
  if (config.uplink.requests_per_minute > 1_500) {
    warnings.push(`uplink.requests_per_minute: ${config.uplink.requests_per_minute} is above the service limit of 1,500 per minute per IP (§8); expect 429 responses`);
  }
  if (config.http.enabled && !isLoopback(config.http.host) && !config.http.api_token) {
    warnings.push(`http.host: ${config.http.host} is reachable from the network but http.api_token is not set; writes to the local API will be refused`);
  }
  return warnings;
}

export function isLoopback(host: string): boolean {
  // A literal address, not a prefix: "127.evil.example" is a name that resolves anywhere.
  return isLoopbackHost(host);
}
