import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { ConfigError } from '../../src/core/errors.js';
import { loadConfigFile, parseConfigText, validateConfig } from '../../src/config/load.js';

const base = {
  service: {
    base_url: 'http://127.0.0.1:9/tracking/v1',
    auth_url: 'http://127.0.0.1:9',
    organisation_id: 'org_demo',
    auth: { mode: 'client_credentials', client_id: 'gw', client_secret: { env: 'TEST_SECRET_FOR_LOAD' } },
  },
};

function problemsOf(raw: unknown): string[] {
  try {
    validateConfig(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected the config to be refused');
}

describe('config validation', () => {
  process.env.TEST_SECRET_FOR_LOAD = 's3cr3t-value';

  it('applies defaults and resolves secrets from the environment', () => {
    const { config } = validateConfig(base);
    expect(config.uplink.batch_size).toBe(200);
    expect(config.uplink.requests_per_minute).toBe(1400);
    expect(config.buffer.commit_interval).toBe(100);
    expect(config.service.item_id_field).toBe('machine_variable_id');
    const auth = config.service.auth;
    if (auth.mode !== 'client_credentials') throw new Error('mode');
    expect(auth.client_secret.reveal()).toBe('s3cr3t-value');
    // The secret never prints.
    expect(JSON.stringify(config)).not.toContain('s3cr3t-value');
    expect(inspect(config, { depth: 10 })).not.toContain('s3cr3t-value');
    expect(String(auth.client_secret)).toBe('[redacted]');
  });

  it('names the path and the bad value', () => {
    expect(problemsOf({ ...base, uplink: { batch_size: 250 } })).toEqual(['uplink.batch_size: 250 is above the maximum of 200']);
    expect(problemsOf({ ...base, uplink: { batch_size: 0 } })).toEqual(['uplink.batch_size: 0 is below the minimum of 1']);
    expect(problemsOf({ ...base, buffer: { when_full: 'drop' } })).toEqual(['buffer.when_full: "drop" is not one of drop_oldest, refuse_new']);
    expect(problemsOf({ ...base, uplink: { batchsize: 3 } })).toEqual(['uplink.batchsize: unknown setting (did you mean "batch_size"?)']);
    expect(problemsOf({ ...base, buffer: { max_bytes: '12 parsecs' } })).toEqual(['buffer.max_bytes: "12 parsecs" is not a size (use bytes or a unit: 512MB, 2GiB)']);
    expect(problemsOf({ ...base, generator: [{ name: 'g', variables: ['temp'] }] })).toEqual(['generator[0].variables[0]: "temp" is not a machine variable id (mvr_...)']);
  });

  it('reports a missing secret by setting and variable name without a value', () => {
    const problems = problemsOf({ ...base, service: { ...base.service, auth: { mode: 'client_credentials', client_id: 'gw', client_secret: { env: 'NOT_SET_ANYWHERE_X' } } } });
    expect(problems).toEqual(['service.auth.client_secret: environment variable NOT_SET_ANYWHERE_X is not set (nor NOT_SET_ANYWHERE_X_FILE)']);
  });

  it('reads secrets from *_FILE', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-secret-'));
    const file = join(dir, 'secret');
    writeFileSync(file, 'from-file\n');
    process.env.TEST_SECRET_FILE_ONLY_FILE = file;
    const { config } = validateConfig({ ...base, service: { ...base.service, auth: { mode: 'client_credentials', client_id: 'gw', client_secret: { env: 'TEST_SECRET_FILE_ONLY' } } } });
    const auth = config.service.auth;
    if (auth.mode !== 'client_credentials') throw new Error('mode');
    expect(auth.client_secret.reveal()).toBe('from-file');
  });

  it('requires base_url to end in /tracking/v1 and auth_url for client credentials', () => {
    const problems = problemsOf({ ...base, service: { ...base.service, base_url: 'http://x/api', auth_url: undefined } });
    expect(problems).toContain('service.base_url: must end in /tracking/v1 (interface conventions)');
  });

  it('reports YAML syntax errors with a line number', () => {
    expect(() => parseConfigText('service:\n  base_url: [unclosed\n')).toThrow(/line \d+/);
  });

  it('loads a file and names it when unreadable', () => {
    expect(() => loadConfigFile('/nonexistent/gw.yaml')).toThrow(/cannot be read \(ENOENT\)/);
  });
});
