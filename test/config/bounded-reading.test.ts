import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfigText, parseYamlConfig, parseYamlDocument } from '../../src/config/load.js';
import { MAX_ALIASES } from '../../src/config/yaml-checks.js';
import { ConfigError } from '../../src/core/errors.js';
import { runCli } from '../helpers/cli.js';

/**
 * Reading a configuration costs time linear in its size, whatever it holds: keys by the hundred
 * thousand, alias bombs of any size in either reader (the `yaml` library's document, and js-yaml
 * above 256 kB), and a list of problems as long as the file. Each case here ran for minutes or
 * crashed before (the times are in bench/config-hostile.ts; these assert what is read or refused).
 */

const dir = mkdtempSync(join(tmpdir(), 'gw-bounded-cfg-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const keys = (n: number) => Array.from({ length: n }, (_, i) => `k${i.toString(36)}: ${i}`).join('\n');

/** A billion laughs in flow style, written as JSON writes it (`"b":&b {"b0":*a}`: no blank after the colon), padded to `bytes`. */
function flowBomb(bytes: number, levels = 9): string {
  const parts = ['"a":&a ["x","x","x","x","x","x","x","x","x","x"]'];
  for (let l = 1; l < levels; l++) {
    const k = String.fromCharCode(97 + l);
    parts.push(`"${k}":&${k} {${Array.from({ length: 10 }, (_, i) => `"${k}${i}":*${String.fromCharCode(96 + l)}`).join(',')}}`);
  }
  const head = `bomb: {${parts.join(', ')}}\n`;
  return `${head}pad: "${'x'.repeat(Math.max(0, bytes - head.length - 10))}"\n`;
}

/** The same in block style. */
function blockBomb(bytes: number): string {
  const lines = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
  for (let l = 1; l < 9; l++) lines.push(`${String.fromCharCode(97 + l)}: &${String.fromCharCode(97 + l)} [${Array(10).fill(`*${String.fromCharCode(96 + l)}`).join(', ')}]`);
  const head = `${lines.join('\n')}\n`;
  return `${head}pad: "${'x'.repeat(Math.max(0, bytes - head.length - 10))}"\n`;
}

function refusal(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('not refused');
}

describe('keys by the hundred thousand', () => {
  it('reads 100,000 distinct keys and an anchor (the full reader) to the values written, and names a key written twice by its line', () => {
    const text = `x: &one 1\ny: *one\n${keys(100_000)}\n`;
    const value = parseYamlConfig(text) as Record<string, number>;
    expect(Object.keys(value)).toHaveLength(100_002);
    expect([value.y, value.k0, value[`k${(99_999).toString(36)}`]]).toEqual([1, 0, 99_999]);
    const twice = refusal(() => parseYamlConfig(`${text}k${(5).toString(36)}: again\n`));
    expect(twice.problems).toEqual([expect.stringMatching(/^config: YAML syntax error at line 100003, column 1: Map keys must be unique \("k5" is written twice\)/)]);
  }, 180_000);

  it('300,000 unknown settings get one clear error listing the first 100, not a crash', () => {
    const err = refusal(() => parseConfigText(keys(300_000)));
    expect(err.problems).toContain('k0: unknown setting');
    expect(err.problems).toContain('(top level): 299,900 more unknown settings (300,000 in all); the settings it accepts are gateway, log, service, uplink, buffer, store, http, generator, opcua, modbus, mqtt, annotations, fleet, gaps');
    expect(err.problems.length).toBeLessThan(110);
  });

  it('edge-gateway check on 300,000 top-level keys exits 2 naming them, not 1 with a stack overflow', async () => {
    const file = join(dir, 'keys.yaml');
    writeFileSync(file, keys(300_000));
    const r = await runCli(['check', '--config', file], { timeoutMs: 120_000 });
    expect(r.err).not.toMatch(/Maximum call stack/);
    expect(r.code).toBe(2);
    expect(r.err).toContain('(top level): 299,900 more unknown settings');
  }, 150_000);
});

describe('alias bombs of any size, in both readers', () => {
  const cases: Array<[string, string]> = [
    ['flow style, 1 kB', flowBomb(1_000)],
    ['flow style, 300 kB (the lean reader)', flowBomb(300_000)],
    ['flow style, 4 MB', flowBomb(4_000_000)],
    ['block style, 300 kB', blockBomb(300_000)],
    ['block style, 4 MB', blockBomb(4_000_000)],
  ];
  for (const [name, text] of cases) {
    it(`${name}: refused by the gateway's reader and by the full reader the console uses, naming the limit`, () => {
      for (const read of [() => parseConfigText(text), () => parseYamlDocument(text)]) {
        const err = refusal(read);
        expect(err.problems).toEqual([expect.stringMatching(/aliases expand to more than 100,000 values \(an "alias bomb"\)/)]);
      }
    });
  }

  it('a shared list repeated a few dozen times is read (20 devices sharing 200 registers)', () => {
    const regs = Array.from({ length: 200 }, (_, i) => `    - { variable: mvr_r${i}, table: holding, address: ${i} }`).join('\n');
    const text = `shared:\n  regs: &regs\n${regs}\ndevices:\n${Array.from({ length: 20 }, (_, i) => `  - { name: d${i}, registers: *regs }`).join('\n')}\n`;
    const value = parseYamlConfig(text) as { devices: Array<{ registers: unknown[] }> };
    expect(value.devices.map((d) => d.registers.length)).toEqual(Array(20).fill(200));
  });

  it(`refuses more than ${MAX_ALIASES} aliases, and an alias inside the node it names`, () => {
    const many = `a: &a 1\nlist: [${Array(MAX_ALIASES + 1).fill('*a').join(', ')}]\n`;
    expect(refusal(() => parseYamlConfig(many)).problems).toEqual([expect.stringMatching(/^config: line 2: list\[1000\]: more than 1,000 aliases \(\*name\)/)]);
    expect(refusal(() => parseYamlConfig('generator: &a [*a]\n')).problems).toEqual(['config: line 1: generator[0]: alias *a is inside the node &a names, which would contain itself']);
  });
});
