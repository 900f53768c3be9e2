import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { secretFieldPatterns } from '../../src/config/secret-fields.js';
import { maskSecrets, unmaskSecrets } from '../../src/console/config-edit.js';

/** Issue 21 §3: the secret settings come from the schema, and the console masks every one of them. */
describe('secret settings', () => {
  it('are read from the schema, and every one is masked and put back', () => {
    const patterns = secretFieldPatterns();
    expect(patterns).toEqual(expect.arrayContaining(['mqtt.connections[].tls.passphrase', 'service.auth.client_secret', 'http.api_token', 'opcua.servers[].user.password', 'fleet.mqtt.password']));
    // One document with a literal at every secret setting (list indexes as 0).
    const doc: Record<string, unknown> = {};
    patterns.forEach((p, i) => {
      const keys = p.replace(/\[\]/g, '.0').split('.');
      let at: Record<string, unknown> | unknown[] = doc;
      keys.forEach((k, j) => {
        const last = j === keys.length - 1;
        const key = /^\d+$/.test(k) ? Number(k) : k;
        const container = at as Record<string | number, unknown>;
        if (last) container[key] = `literal-secret-${i}-zz`;
        else container[key] ??= /^\d+$/.test(keys[j + 1]) ? [] : {};
        at = container[key] as Record<string, unknown>;
      });
    });
    const masked = maskSecrets(toYaml(doc));
    for (let i = 0; i < patterns.length; i++) expect(masked, patterns[i]).not.toContain(`literal-secret-${i}-zz`);
    expect(JSON.stringify(parseYaml(masked))).toMatch(/hidden secret/);
    // Posted back, every placeholder stands for its secret again.
    expect(unmaskSecrets(masked, toYaml(doc))).toEqual({ text: toYaml(doc), problems: [] });
  });

  it('are masked in a text that is not valid YAML too', () => {
    const broken = 'mqtt:\n  connections:\n    - name: a\n      password: broken-file-secret-1\n      tls: { passphrase: broken-pass-2, servername: b\n      api_token: \'quoted secret-3\'\n  bad: [\n';
    const masked = maskSecrets(broken);
    for (const secret of ['broken-file-secret-1', 'broken-pass-2', 'secret-3']) expect(masked).not.toContain(secret);
    expect(masked).toContain('servername: b');
    expect(masked).toContain('password: "(hidden)"');
  });

  it('are masked where an anchor writes them, and such a placeholder is not put back outside a secret setting', () => {
    const text = 'x-shared: { pw: &pw anchored-secret-4 }\nfleet:\n  mqtt: { url: "mqtt://127.0.0.1:1883", password: *pw }\n';
    const masked = maskSecrets(text);
    expect(masked).not.toContain('anchored-secret-4');
    expect(masked).toContain('*pw');
    expect(unmaskSecrets(masked, text).problems).toEqual([{ path: 'x-shared.pw', line: 1, message: 'x-shared.pw: holds the placeholder of a hidden secret, but it is not a secret setting' }]);
  });
});
