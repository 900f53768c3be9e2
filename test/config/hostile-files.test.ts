import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { parseConfigText } from '../../src/config/load.js';

/**
 * Issue 12 §4: files that used to crash `check` or fail only at run (exit 1, no file, a library's
 * message) now exit 2 with a message naming the file, the setting and the value.
 */

const dir = mkdtempSync(join(tmpdir(), 'gw-hostile-cfg-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const BASE = `service:
  base_url: http://127.0.0.1:18999/tracking/v1
  auth_url: http://127.0.0.1:18999
  organisation_id: org_demo
  auth: { mode: client_credentials, client_id: demo-gateway, client_secret: { env: NOT_NEEDED_HERE } }
`;

const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]', ...'bcdefgh'.split('').map((k, i) => `${k}: &${k} [${Array(9).fill(`*${'abcdefgh'[i]}`).join(',')}]`)].join('\n');

const CASES: Array<{ name: string; text: string; expect: RegExp[] }> = [
  { name: 'alias-bomb', text: `${BASE}${bomb}\n`, expect: [/line 11: f\[0\]: alias \*e: aliases expand to more than 100,000 values/] },
  { name: 'unresolved-alias', text: `${BASE}gateway: { name: *nope }\n`, expect: [/line 6: gateway\.name: alias \*nope refers to no anchor &nope/] },
  { name: 'deep-flow', text: `${BASE}generator: ${'['.repeat(5_000)}${']'.repeat(5_000)}\n`, expect: [/line 6: nesting deeper than 64 levels \(\d+ levels of brackets under "generator"\)/] },
  { name: 'deep-block', text: `${BASE}generator:\n${Array.from({ length: 5_000 }, (_, i) => `${'  '.repeat(i + 1)}k:`).join('\n')}\n`, expect: [/nesting deeper than 64 levels \(65 indentation levels under "generator"\)/] },
  { name: 'two-documents', text: `${BASE}---\ngateway: { name: b }\n`, expect: [/line 6: a second YAML document starts here/] },
  { name: 'bad-host', text: `${BASE}http: { host: "not a host!" }\n`, expect: [/http\.host: "not a host!" is not an IP address or a host name/] },
  {
    name: 'credentials-in-url',
    text: BASE.replace('base_url: http://127.0.0.1:18999/tracking/v1', 'base_url: https://gw:Pw-in-url-9Zq@api.example.com/tracking/v1').replace('auth_url: http://127.0.0.1:18999', 'auth_url: https://gw:Pw-in-url-9Zq@auth.example.com'),
    expect: [/service\.base_url: must not contain a user name or password/, /service\.auth_url: must not contain a user name or password/],
  },
  // Issue 21 §3: secret files are regular files of at most 64 KiB; a FIFO used to freeze the
  // reader, /dev/zero to grow it by 1 GB/s.
  { name: 'secret-fifo', text: BASE.replace('{ env: NOT_NEEDED_HERE }', `{ file: ${join(dir, 'secret.fifo')} }`), expect: [/service\.auth\.client_secret: secret file \S+secret\.fifo is a FIFO \(named pipe\), not a regular file/] },
  { name: 'secret-device', text: BASE.replace('{ env: NOT_NEEDED_HERE }', '{ file: /dev/zero }'), expect: [/service\.auth\.client_secret: secret file \/dev\/zero is a character device, not a regular file/] },
  { name: 'secret-too-large', text: BASE.replace('{ env: NOT_NEEDED_HERE }', `{ file: ${join(dir, 'secret.big')} }`), expect: [/service\.auth\.client_secret: secret file \S+secret\.big is 100000 bytes, more than the 64 KiB a secret file may have/] },
  {
    name: 'duplicate-source',
    text: `${BASE}generator:\n  - { name: press, variables: [mvr_a], interval: 1s }\nmqtt:\n  broker: { enabled: true, name: press, allow_anonymous: true }\n`,
    expect: [/mqtt\.broker\.name: "press" is already the name of generator\[0\]\.name/],
  },
];

describe('service URLs', () => {
  it('warns about plain http:// to a host that is not this machine, not about loopback', () => {
    const literal = BASE.replace('{ env: NOT_NEEDED_HERE }', 'literal-secret-1');
    const remote = parseConfigText(literal.replace(/127\.0\.0\.1:18999/g, '10.1.2.3:8787'), 'gw.yaml');
    expect(remote.warnings).toEqual(expect.arrayContaining([expect.stringMatching(/^service\.base_url: http:\/\/10\.1\.2\.3:8787\/tracking\/v1 is plain http:\/\/ to 10\.1\.2\.3/), expect.stringMatching(/^service\.auth_url: .* plain http:\/\//)]));
    const local = parseConfigText(literal, 'gw.yaml');
    expect(local.warnings.filter((w) => w.includes('plain http://'))).toEqual([]);
  });
});

describe('hostile configuration files', () => {
  it('each exits 2 from check with the file, the setting and the value', async () => {
    execFileSync('mkfifo', [join(dir, 'secret.fifo')]);
    writeFileSync(join(dir, 'secret.big'), 'x'.repeat(100_000));
    const results = await Promise.all(
      CASES.map(async (c) => {
        const file = join(dir, `${c.name}.yaml`);
        writeFileSync(file, c.text);
        return { c, file, r: await runCli(['check', '--config', file], { env: { NOT_NEEDED_HERE: 'x' }, timeoutMs: 90_000 }) };
      }),
    );
    for (const { c, file, r } of results) {
      expect({ name: c.name, code: r.code }).toEqual({ name: c.name, code: 2 });
      expect(r.err).toContain(`configuration ${file} is not valid`);
      for (const re of c.expect) expect(r.err, c.name).toMatch(re);
      expect(r.err).not.toMatch(/Maximum call stack|parseAllDocuments|Excessive alias count|ENOTFOUND/);
      expect(r.out + r.err).not.toContain('Pw-in-url-9Zq');
    }
  }, 120_000);
});
