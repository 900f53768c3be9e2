import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { entryByLines, entryYaml, WHOLE_PARSE_MAX_CHARS } from '../../src/console/config-source.js';

/** Every `variable:` setting in a parsed configuration, as the console's index names them (`opcua.servers[0].nodes[3].variable`). */
function variableSettings(value: unknown, path = ''): Array<{ id: string; setting: string }> {
  const out: Array<{ id: string; setting: string }> = [];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...variableSettings(v, `${path}[${i}]`)));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const p = path ? `${path}.${k}` : k;
      if (k === 'variable' && typeof v === 'string') out.push({ id: v, setting: p });
      else out.push(...variableSettings(v, p));
    }
  }
  return out;
}

describe("a variable's configuration entry in a plant-sized file (issue 25)", () => {
  it('finds by lines what parsing the whole file finds, for every variable of the shipped configurations', () => {
    const files = ['config/demo.yaml', 'config/gateway.example.yaml', ...readdirSync('config/examples').map((f) => join('config/examples', f))];
    let found = 0;
    let total = 0;
    for (const f of files) {
      const text = readFileSync(f, 'utf8');
      for (const { id, setting } of variableSettings(parse(text))) {
        if (setting.startsWith('annotations')) continue;
        total += 1;
        const byLines = entryByLines(text, id, setting.split('.')[0]);
        if (byLines === null) continue;
        found += 1;
        expect(byLines, `${f} ${setting}`).toBe(entryYaml(text, { id, settings: [setting], config: null }));
      }
    }
    expect(total).toBeGreaterThan(20);
    expect(found).toBe(total);
  });

  it('in a 100,000-variable file, block and flow style, with comments: the entry as written, without parsing the file', () => {
    const nodes = Array.from({ length: 100_000 }, (_, i) => ({ node_id: `ns=2;s=Plant.Var${i + 1}`, variable: `mvr_${i + 1}`, ...(i % 3 === 0 ? { deadband: { type: 'absolute', value: 0.5 } } : {}) }));
    const block = stringify({ opcua: { servers: [{ name: 'plant', endpoint: 'opc.tcp://127.0.0.1:4840', nodes }] } });
    expect(block.length).toBeGreaterThan(WHOLE_PARSE_MAX_CHARS);
    const info = (id: string, n: number) => ({ id, settings: [`opcua.servers[0].nodes[${n}].variable`], config: { node_id: 'x', variable: id } });
    expect(entryYaml(block, info('mvr_1', 0))).toBe('node_id: ns=2;s=Plant.Var1\nvariable: mvr_1\ndeadband:\n  type: absolute\n  value: 0.5');
    expect(entryYaml(block, info('mvr_50001', 50_000))).toBe('node_id: ns=2;s=Plant.Var50001\nvariable: mvr_50001');
    expect(entryYaml(block, info('mvr_100000', 99_999))).toBe('node_id: ns=2;s=Plant.Var100000\nvariable: mvr_100000\ndeadband:\n  type: absolute\n  value: 0.5');
    // mvr_1 is not mvr_10: the id is matched whole.
    expect(entryYaml(block, info('mvr_10', 9))).toBe('node_id: ns=2;s=Plant.Var10\nvariable: mvr_10\ndeadband:\n  type: absolute\n  value: 0.5');

    const flow = ['modbus:', '  devices:', '    - name: line', '      registers:', ...Array.from({ length: 20_000 }, (_, i) => `        - { variable: "mvr_r${i}", table: holding, address: ${i}, type: uint16 }   # register ${i}`)].join('\n');
    expect(flow.length).toBeGreaterThan(WHOLE_PARSE_MAX_CHARS);
    expect(entryYaml(flow, { id: 'mvr_r123', settings: ['modbus.devices[0].registers[123].variable'], config: null })).toBe('{ variable: "mvr_r123", table: holding, address: 123, type: uint16 }   # register 123');
  });

  it('writes the entry afresh where the lines do not show it plainly: the id twice, or not as a mapping', () => {
    const filler = Array.from({ length: 6_000 }, (_, i) => `        - { node_id: "ns=2;s=V${i}", variable: v${i} }`).join('\n');
    const twice = `opcua:\n  servers:\n    - name: a\n      nodes:\n        - { node_id: "ns=2;s=X", variable: dup }\n${filler}\n    - name: b\n      nodes:\n        - { node_id: "ns=2;s=Y", variable: dup }\n`;
    expect(twice.length).toBeGreaterThan(WHOLE_PARSE_MAX_CHARS);
    expect(entryByLines(twice, 'dup')).toBeNull();
    expect(entryYaml(twice, { id: 'dup', settings: ['opcua.servers[0].nodes[0].variable'], config: { node_id: 'ns=2;s=X', variable: 'dup' } })).toBe('node_id: ns=2;s=X\nvariable: dup');
    expect(entryByLines(`${filler}\nnotes: "before, variable: v5 and after"\n`, 'v5')).toBeNull();
    // Named again by a detector under annotations: the entry is found in its own section.
    const withDetector = `opcua:\n  servers:\n    - name: a\n      nodes:\n${filler}\nannotations:\n  detectors:\n    - { machine: m, variable: v7 }\n`;
    expect(entryByLines(withDetector, 'v7')).toBeNull();
    expect(entryByLines(withDetector, 'v7', 'opcua')).toBe('{ node_id: "ns=2;s=V7", variable: v7 }');
    expect(entryByLines(filler, 'v6000')).toBeNull();
  });
});
