import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dump } from 'js-yaml';
import { stringify } from 'yaml';
import { parseConfigText, parseYamlDocument } from '../../src/config/load.js';
import { LEAN_READER_MIN_CHARS, readYamlLean } from '../../src/config/yaml-lean.js';
import { ConfigError } from '../../src/core/errors.js';
import { rng } from '../helpers/random.js';

/** What the full reader (the `yaml` library, with its checks) makes of a text. */
const full = (text: string) => parseYamlDocument(text).value;

/** Plain scalars whose meaning differs between YAML 1.1, js-yaml's own schema and YAML 1.2 core. */
const TRICKY = [
  '1_000', '0b101', '0o17', '0x1F', '0X1F', '017', '+5', '-0', '.5', '1.', '1e3', '-1.5E-3', '.inf', '-.Inf', '+.INF', '.NaN', '.nan', 'NaN',
  '~', 'null', 'Null', 'NULL', 'nULL', 'true', 'True', 'TRUE', 'tRUE', 'yes', 'No', 'on', 'OFF', 'y', '1:20', '190:20:30', '2026-11-26',
  '2026-11-26T10:00:00Z', '12345678901234567890', '0.1', '1,000', '1 000', 'ns=2;s=Line1.Press.Speed', 'mvr_1', '3.14.15', '-', '--', 'a: b',
  '#not a comment', 'x # comment', 'tab\there', 'ü日本', '"', "'", '\\', 'line\nbreak', '', ' lead', 'trail ', '[', '{a}', '<<', '=', '@x', '`x',
];

describe('the lean YAML reader for large configurations (issue 25)', () => {
  it('reads every shipped configuration as the full reader does', () => {
    const files = ['config/demo.yaml', 'config/gateway.example.yaml', ...readdirSync('config/examples').map((f) => join('config/examples', f))];
    expect(files.length).toBeGreaterThanOrEqual(7);
    let leanRead = 0;
    for (const f of files) {
      const text = readFileSync(f, 'utf8');
      const lean = readYamlLean(text);
      if (lean) {
        leanRead += 1;
        expect(lean.value, f).toEqual(full(text));
      }
    }
    // The shipped files use no anchors or tags; one has `, !=` in a comment, which sends it to the
    // full reader (the check is broad on purpose).
    expect(leanRead).toBeGreaterThanOrEqual(files.length - 2);
  });

  it('resolves tricky scalars by YAML 1.2 core, as the full reader does, plain, quoted, as keys and in flow style', () => {
    const plain = TRICKY.filter((s) => s && !/[\n"'\\#:[\]{}`@,]|^[-~ ]|[ \t]$|\t/.test(s) && s !== '<<' && s !== '=');
    const texts = [
      plain.map((s, i) => `k${i}: ${s}`).join('\n'),
      plain.map((s) => `- ${s}`).join('\n'),
      `flow: [${plain.join(', ')}]`,
      TRICKY.map((s, i) => `k${i}: ${JSON.stringify(s)}`).join('\n'),
      TRICKY.map((s, i) => `k${i}: '${s.replace(/'/g, "''").replace(/\n/g, '\n\n  ')}'`).join('\n'),
      'block: |\n  one\n   two\n\n  three\nfolded: >-\n  a\n  b\n\n  c\nkeep: |+\n  x\n\nend: 1\n',
      'plain: this is\n  a folded\n  plain scalar\nempty:\nnested:\n  - a: 1\n    b: [1, {c: d}]\n  - - x\n    - y\n',
      'crlf: 1\r\nsecond: two\r\nlist:\r\n  - a\r\n',
      '\ufeffbom: true\n',
      '# only a comment\n',
      '',
      'top-level scalar',
      '---\nmarked: 1\n...\n',
      'utf: "\\u00fc\\x41\\t\\"q\\""\nkey with spaces: v\n"quoted key": 2\n',
    ];
    for (const text of texts) {
      const lean = readYamlLean(text);
      expect(lean, text).toBeDefined();
      expect(lean!.value, text).toEqual(full(text));
    }
    // As keys, several resolve to one value (null, Null; true, True): both readers refuse the
    // duplicate, the lean one by leaving the text to the full one. Key by key, they agree.
    expect(readYamlLean(plain.map((s, i) => `${s}: v${i}`).join('\n'))).toBeUndefined();
    expect(() => full(plain.map((s, i) => `${s}: v${i}`).join('\n'))).toThrow(/Map keys must be unique/);
    let asKeys = 0;
    for (const [i, s] of plain.entries()) {
      const text = `${s}: v${i}\nother: 1\n`;
      const lean = readYamlLean(text);
      if (!lean) continue; // the null keys (the full reader makes them "")
      asKeys += 1;
      expect(lean.value, text).toEqual(full(text));
    }
    expect(asKeys).toBe(plain.length - 3); // null, Null, NULL
  });

  it('gives the same value as the full reader for 300 random documents written by both libraries in several styles', () => {
    const r = rng(25);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)];
    const scalar = (): unknown => {
      const k = r();
      if (k < 0.45) return pick(TRICKY);
      if (k < 0.6) return Math.floor((r() - 0.5) * 1e9);
      if (k < 0.7) return (r() - 0.5) * 10 ** Math.floor(r() * 20 - 10);
      if (k < 0.75) return pick([true, false, null]);
      return Array.from({ length: 1 + Math.floor(r() * 12) }, () => pick(['a', 'Z', ' ', ':', '#', '-', '.', '_', '0', '9', 'ü', '"', "'", '\n', '\t', '[', '}', '%', '&', '*', '!', '?'])).join('');
    };
    const value = (depth: number): unknown => {
      const k = r();
      if (depth > 4 || k < 0.4) return scalar();
      if (k < 0.7) return Array.from({ length: Math.floor(r() * 5) }, () => value(depth + 1));
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(r() * 6); i > 0; i--) o[String(scalar())] = value(depth + 1);
      return o;
    };
    let leanRead = 0;
    for (let i = 0; i < 300; i++) {
      const v = { doc: value(0) };
      const text = pick([
        () => stringify(v),
        () => stringify(v, { defaultStringType: 'QUOTE_DOUBLE' }),
        () => stringify(v, { collectionStyle: 'flow' }),
        () => stringify(v, { lineWidth: 20, minContentWidth: 5 }),
        () => dump(v, { lineWidth: 20 }),
        () => dump(v, { flowLevel: 2 }),
        () => dump(v, { noCompatMode: true, quotingType: '"' }),
      ])();
      const lean = readYamlLean(text);
      if (!lean) continue;
      leanRead += 1;
      expect(lean.value, text).toEqual(full(text));
    }
    expect(leanRead).toBeGreaterThan(100);
  });

  it('on 2,000 damaged copies of the shipped configurations: where both readers take a text, they agree', () => {
    const r = rng(2025);
    const base = ['config/demo.yaml', 'config/gateway.example.yaml', 'config/examples/opcua.yaml', 'config/examples/modbus.yaml', 'config/examples/mqtt.yaml'].map((f) => readFileSync(f, 'utf8'));
    const bits = [' ', '\n', ':', '-', '"', "'", '#', '[', ']', '{', '}', ',', '|', '>', '\t', 'a', '0', '.', '  '];
    const tally = { both: 0, leanOnly: 0, fullOnly: 0, neither: 0 };
    for (let i = 0; i < 2_000; i++) {
      let t = base[Math.floor(r() * base.length)];
      for (let k = 1 + Math.floor(r() * 3); k > 0; k--) {
        const p = Math.floor(r() * t.length);
        const op = r();
        t = op < 0.4 ? t.slice(0, p) + t.slice(p + 1 + Math.floor(r() * 3)) : op < 0.8 ? t.slice(0, p) + bits[Math.floor(r() * bits.length)] + t.slice(p) : t.slice(0, p) + t.slice(p).replace(/^ +/, (m) => m.slice(1));
      }
      const lean = readYamlLean(t);
      let f: unknown;
      let ok = true;
      try {
        f = full(t);
      } catch {
        ok = false;
      }
      if (lean && ok) {
        tally.both += 1;
        expect(lean.value, t).toEqual(f);
      } else if (lean) tally.leanOnly += 1;
      else if (ok) tally.fullOnly += 1;
      else tally.neither += 1;
    }
    // Most damaged copies are still YAML; js-yaml takes a few the full reader refuses (a flow map
    // not indented enough, a comment glued to a token): it reads them as written.
    expect(tally.both).toBeGreaterThan(1_000);
    expect(tally.leanOnly).toBeLessThan(tally.both / 100);
  });

  it('leaves anchors, aliases, tags, directives, explicit keys, duplicate keys and syntax errors to the full reader', () => {
    for (const text of [
      'a: &x 1\nb: *x\n',
      'a: !!str 5\n',
      'a: !custom x\n',
      '%YAML 1.1\n---\na: yes\n',
      '? [a, b]\n: c\n',
      '[a, b]: c\n',
      '- {a: 1}: c\n',
      '~: a\nb: 1\n',
      'x:\n  null: a\n',
      'a: 1\na: 2\n',
      'a: 1\n---\nb: 2\n',
      'a: [1, 2\n',
      'a:\n\t- tab\n',
    ]) {
      expect(readYamlLean(text), text).toBeUndefined();
    }
  });

  it('reads a generated 100,000-variable configuration the lean way, to the same validated config as the full reader', () => {
    const nodes = Array.from({ length: 100_000 }, (_, i) => ({ node_id: `ns=2;s=Plant.Line${i % 40}.Var${i + 1}`, variable: `mvr_opcua_${i + 1}`, ...(i % 7 === 0 ? { queue_size: 5, sampling_interval: '500ms' } : {}) }));
    const config = {
      gateway: { name: 'plant' },
      service: { base_url: 'http://127.0.0.1:9/tracking/v1', organisation_id: 'org_demo', auth: { mode: 'api_key', api_key: 'k' } },
      opcua: { servers: [{ name: 'plant', endpoint: 'opc.tcp://127.0.0.1:4840', security_mode: 'None', nodes }] },
    };
    const text = stringify(config);
    expect(text.length).toBeGreaterThan(LEAN_READER_MIN_CHARS);
    const lean = readYamlLean(text);
    expect(lean).toBeDefined();
    expect(lean!.value).toEqual(config);
    // Through the loader, validated: the same as the full reader's value validated.
    const viaLoader = parseConfigText(text, 'big.yaml').config;
    expect(viaLoader.opcua!.servers[0].nodes).toHaveLength(100_000);
    expect(viaLoader.opcua!.servers[0].nodes[99_999]).toMatchObject({ node_id: 'ns=2;s=Plant.Line39.Var100000', variable: 'mvr_opcua_100000' });
  });

  it('a large file with a mistake gets the full reader\'s message, with the line', () => {
    const filler = Array.from({ length: 12_000 }, (_, i) => `  - { node_id: "ns=2;s=V${i}", variable: mvr_${i} }`).join('\n');
    const text = `gateway:\n  name: plant\ngateway:\n  name: again\nopcua:\n  servers:\n    - name: plant\n      endpoint: opc.tcp://127.0.0.1:4840\n      nodes:\n${filler.replace(/^/gm, '    ')}\n`;
    expect(text.length).toBeGreaterThan(LEAN_READER_MIN_CHARS);
    let err: unknown;
    try {
      parseConfigText(text, 'big.yaml');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect(String((err as ConfigError).message)).toMatch(/big\.yaml: YAML syntax error at line 3, column 1: Map keys must be unique/);
  });
});
