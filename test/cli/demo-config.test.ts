import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { prepareDemoConfig } from '../../src/commands/demo-config.js';
import { UsageError } from '../../src/commands/flags.js';
import { ROOT } from '../helpers/cli.js';

/** Issue 24 §2: the demo's configuration file in its data folder, written once and kept. */
const TEMPLATE = join(ROOT, 'config', 'demo.yaml');
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'demo-config-'));
  process.env.GATEWAY_CLIENT_SECRET ??= 'demo-config-test-secret';
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('the demo configuration file', () => {
  it('is written at the first start with the ports and folder asked for, every other line of the template as it was', () => {
    const f = prepareDemoConfig({ template: TEMPLATE, templateGiven: false, portsFrom: 21000, dataDir: dir });
    expect(f.written).toBe(true);
    expect(f.path).toBe(join(dir, 'demo.yaml'));
    expect(f.config.http.port).toBe(21001);
    expect(f.config.opcua?.servers[0].endpoint).toBe('opc.tcp://127.0.0.1:21002/UA/Press1');
    expect(f.config.gateway.data_dir).toBe(dir);
    const template = readFileSync(TEMPLATE, 'utf8').split('\n');
    const written = readFileSync(f.path, 'utf8').split('\n');
    const body = written.slice(written.indexOf('') + 1);
    expect(body.length).toBe(template.length);
    const changed = template.filter((line, i) => line !== body[i]);
    // data_dir, service.base_url, auth_url, buffer.path, http.port, the endpoint, the Modbus port, the broker port.
    expect(changed).toHaveLength(8);
    expect(body.find((l) => l.includes('port: 21003'))).toContain('# 502 on a real device');
  });

  it('is kept at a later start, edits included; --config is then not read and disagreeing ports are refused', () => {
    const first = prepareDemoConfig({ template: TEMPLATE, templateGiven: false, portsFrom: 21000, dataDir: dir });
    writeFileSync(first.path, readFileSync(first.path, 'utf8').replace('status_interval: 5s', 'status_interval: 7s'));
    const again = prepareDemoConfig({ template: TEMPLATE, templateGiven: true, portsFrom: 21000, dataDir: dir });
    expect(again.written).toBe(false);
    expect(again.config.gateway.status_interval).toBe(7_000);
    expect(again.notes.join('\n')).toContain(`--config ${TEMPLATE} was not read`);
    expect(() => prepareDemoConfig({ template: TEMPLATE, templateGiven: false, portsFrom: 22000, dataDir: dir })).toThrow(UsageError);
    expect(() => prepareDemoConfig({ template: TEMPLATE, templateGiven: false, portsFrom: 22000, dataDir: dir })).toThrow(/--ports-from 22000: the demo runs from .*demo\.yaml/);
    expect(readFileSync(first.path, 'utf8')).toContain('status_interval: 7s');
  });
});
