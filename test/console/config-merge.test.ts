import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { withoutReadingSecrets } from '../../src/config/secrets.js';
import { commentColumn, MergeError, mergeModbusRegisters, mergeOpcuaNodes } from '../../src/console/config-merge.js';

/**
 * "Add to configuration" (issue 24 §3): the merge writes new lines into the user's text and
 * changes nothing else, byte for byte; it creates or extends the right section, names new
 * sources apart from every existing one, and leaves out duplicates with the reason.
 */

/** `after` is `before` with whole lines inserted: removing the lines `added` gives `before` back. */
function insertedLines(before: string, after: string): string[] {
  const a = before.split('\n');
  const b = after.split('\n');
  const added: string[] = [];
  let i = 0;
  for (const line of b) {
    if (i < a.length && line === a[i]) i += 1;
    else added.push(line);
  }
  expect(i, 'every line of the user text is still there, in order').toBe(a.length);
  return added;
}

const mixer = { name: 'mixer1', transport: 'tcp' as const, host: '127.0.0.1', port: 5020, unit_id: 1 };

const BLOCK = `modbus:
  devices:
    - name: mixer1
      host: 127.0.0.1   # the PLC
      port: 5020
      registers:
        - variable: mvr_mixer1_temperature   # °C
          table: holding
          address: 0
          type: float32
`;

describe('config merge: sections', () => {
  it('creates the modbus section in an empty text', () => {
    const r = mergeModbusRegisters('', mixer, [{ variable: 'mvr_a', table: 'holding', address: 4, type: 'int16' }]);
    expect(r).toMatchObject({ target: 'modbus.devices[0]', created: true, added: 1, skipped: [] });
    expect(parse(r.yaml)).toEqual({ modbus: { name: 'modbus', devices: [{ name: 'mixer1', transport: 'tcp', host: '127.0.0.1', port: 5020, unit_id: 1, registers: [{ variable: 'mvr_a', table: 'holding', address: 4, type: 'int16' }] }] } });
  });

  it('creates a section after a file of comments only, keeping them byte for byte', () => {
    const text = '# Line 3 gateway\n#   written by hand\n';
    const r = mergeOpcuaNodes(text, { name: 'press1', endpoint: 'opc.tcp://10.0.0.5:4840' }, [{ node_id: 'ns=2;s=T', variable: 'mvr_t' }]);
    expect(r.yaml.startsWith(text)).toBe(true);
    expect(r.yaml.slice(text.length)).toBe('\nopcua:\n  servers:\n    - name: press1\n      endpoint: opc.tcp://10.0.0.5:4840\n      security_mode: None\n      nodes:\n        - node_id: ns=2;s=T\n          variable: mvr_t\n');
  });

  it('creates a section after the last one with a blank line between, in a file with no trailing newline', () => {
    const text = 'gateway:\n  name: line3   # the hall name';
    const r = mergeModbusRegisters(text, mixer, [{ variable: 'mvr_a', table: 'coil', address: 2 }]);
    expect(r.yaml.startsWith(`${text}\n\nmodbus:\n`)).toBe(true);
    expect(parse(r.yaml).modbus.devices[0].registers).toEqual([{ variable: 'mvr_a', table: 'coil', address: 2 }]);
  });

  it('appends to a list whose last line has no newline at the end of the file', () => {
    const text = BLOCK.replace(/\n$/, '');
    const r = mergeModbusRegisters(text, mixer, [{ variable: 'mvr_b', table: 'holding', address: 2, type: 'uint16' }]);
    expect(insertedLines(text, r.yaml)).toEqual(['        - variable: mvr_b', '          table: holding', '          address: 2', '          type: uint16', '']);
    expect(r.yaml.startsWith(`${text}\n`)).toBe(true);
  });

  it('refuses a text that is not YAML, or not a mapping of settings, with a MergeError that says so', () => {
    expect(() => mergeModbusRegisters('modbus: [unclosed\n', mixer, [{ variable: 'mvr_a', table: 'coil', address: 0 }])).toThrow(MergeError);
    expect(() => mergeModbusRegisters('modbus: [unclosed\n', mixer, [{ variable: 'mvr_a', table: 'coil', address: 0 }])).toThrow(/not valid YAML.*fix it in the editor first/);
    expect(() => mergeModbusRegisters('- a\n- b\n', mixer, [{ variable: 'mvr_a', table: 'coil', address: 0 }])).toThrow(/not a mapping of settings/);
    expect(() => mergeModbusRegisters('modbus: 5\n', mixer, [{ variable: 'mvr_a', table: 'coil', address: 0 }])).toThrow(/modbus: is not a mapping/);
    expect(() => mergeModbusRegisters('modbus:\n  devices: 3\n', mixer, [{ variable: 'mvr_a', table: 'coil', address: 0 }])).toThrow(/modbus\.devices: is not a list/);
    // Read as the gateway reads a file: nesting a parser could not follow is refused, not a stack overflow.
    expect(() => mergeModbusRegisters(`a: ${'['.repeat(5_000)}`, mixer, [{ variable: 'mvr_a', table: 'coil', address: 0 }])).toThrow(/not valid YAML \(line 1: nesting deeper than/);
  });
});

describe('config merge: appending in the style of the list', () => {
  it('appends to a block list: new lines only, the comments and spacing of the user text stay', () => {
    const r = mergeModbusRegisters(BLOCK, mixer, [{ variable: 'mvr_mixer1_speed', table: 'holding', address: 2, type: 'uint16', comment: 'rpm' }]);
    expect(r).toMatchObject({ target: 'modbus.devices[0]', created: false, added: 1 });
    // The comment goes after the entry's first line, at the column of the sibling's comment.
    expect(insertedLines(BLOCK, r.yaml)).toEqual(['        - variable: mvr_mixer1_speed         # rpm', '          table: holding', '          address: 2', '          type: uint16']);
  });

  it('appends to a flow list: one line per entry, its keys at the columns of the aligned keys above, its comment at their comment column', () => {
    const text = `modbus:
  devices:
    - name: mixer1
      host: 127.0.0.1
      port: 5020
      registers:
        - { variable: mvr_mixer1_temperature, table: holding, address: 0, type: float32 }   # °C
        - { variable: mvr_mixer1_speed,       table: holding, address: 2, type: uint16 }    # rpm
`;
    const r = mergeModbusRegisters(text, mixer, [
      { variable: 'mvr_p', table: 'holding', address: 3, type: 'float32', byte_order: 'CDAB', comment: 'kW' },
      { variable: 'mvr_q', table: 'input', address: 0, type: 'int16', comment: '%' },
    ]);
    const added = insertedLines(text, r.yaml);
    expect(added).toEqual([
      '        - { variable: mvr_p,                  table: holding, address: 3, type: float32, byte_order: CDAB } # kW',
      '        - { variable: mvr_q,                  table: input,   address: 0, type: int16 }     # %',
    ]);
    expect(commentColumn(added[1])).toBe(commentColumn(text.split('\n')[7]));
  });

  it('writes a unit as the entry\'s unit setting (after scale), in block and flow lists, the comment kept as a comment', () => {
    const flow = `modbus:
  devices:
    - name: mixer1
      host: 127.0.0.1
      port: 5020
      registers:
        - { variable: mvr_mixer1_speed, table: holding, address: 2, type: uint16 }
`;
    const r = mergeModbusRegisters(flow, mixer, [{ variable: 'mvr_p', table: 'holding', address: 3, type: 'float32', scale: 0.1, unit: 'kW' }]);
    expect(insertedLines(flow, r.yaml)).toEqual(['        - { variable: mvr_p, table: holding, address: 3, type: float32, scale: 0.1, unit: kW }']);
    const block = mergeModbusRegisters(BLOCK, mixer, [{ variable: 'mvr_q', table: 'input', address: 0, type: 'int16', unit: '°C' }]);
    expect(insertedLines(BLOCK, block.yaml).slice(-2)).toEqual(['          type: int16', '          unit: °C']);
    const node = mergeOpcuaNodes('', { name: 'press1', endpoint: 'opc.tcp://127.0.0.1:4840' }, [{ node_id: 'ns=2;s=T', variable: 'mvr_t', unit: '°C', comment: 'Press1/T (Double)' }]);
    expect((parse(node.yaml) as { opcua: { servers: Array<{ nodes: unknown[] }> } }).opcua.servers[0].nodes[0]).toEqual({ node_id: 'ns=2;s=T', variable: 'mvr_t', unit: '°C' });
    expect(node.yaml).toContain('# Press1/T (Double)');
  });

  it('keeps the default byte order and a coil\'s bool out of the new lines, and writes a bit register with its bit', () => {
    const text = BLOCK.replace('      port: 5020\n', '      port: 5020\n      byte_order: CDAB\n');
    const r = mergeModbusRegisters(text, mixer, [
      { variable: 'mvr_w', table: 'holding', address: 8, type: 'float32', byte_order: 'CDAB' },
      { variable: 'mvr_x', table: 'holding', address: 10, type: 'float32', byte_order: 'ABCD' },
      { variable: 'mvr_run', table: 'coil', address: 3, type: 'bool' },
      { variable: 'mvr_b3', table: 'holding', address: 12, type: 'bit', bit: 3 },
    ]);
    expect(parse(r.yaml).modbus.devices[0].registers.slice(1)).toEqual([
      { variable: 'mvr_w', table: 'holding', address: 8, type: 'float32' },
      { variable: 'mvr_x', table: 'holding', address: 10, type: 'float32', byte_order: 'ABCD' },
      { variable: 'mvr_run', table: 'coil', address: 3 },
      { variable: 'mvr_b3', table: 'holding', address: 12, type: 'bit', bit: 3 },
    ]);
  });

  it('writes a protocol address in the device\'s address_base, and a Modicon reference without a table', () => {
    const text = BLOCK.replace('      port: 5020\n', '      port: 5020\n      address_base: 1\n');
    const r = mergeModbusRegisters(text, mixer, [
      { variable: 'mvr_n', table: 'holding', address: 9, type: 'uint16' },
      { variable: 'mvr_m', table: 'holding', address: 10, written_address: '40011', type: 'uint16' },
    ]);
    expect(parse(r.yaml).modbus.devices[0].registers.slice(1)).toEqual([
      { variable: 'mvr_n', table: 'holding', address: 10, type: 'uint16' },
      { variable: 'mvr_m', address: '40011', type: 'uint16' },
    ]);
  });
});

describe('config merge: new sources and duplicates', () => {
  it('appends a new device when host, port or unit differs, its name made unique across every source', () => {
    const text = `${BLOCK}opcua:\n  servers:\n    - name: plc1\n      endpoint: opc.tcp://10.0.0.5:4840\n      nodes: []\n`;
    const other = mergeModbusRegisters(text, { ...mixer, unit_id: 2 }, [{ variable: 'mvr_u2', table: 'holding', address: 0 }]);
    expect(other).toMatchObject({ target: 'modbus.devices[1]', created: true, added: 1 });
    expect(parse(other.yaml).modbus.devices[1].name).toBe('mixer1_2');
    const plc = mergeModbusRegisters(text, { ...mixer, name: 'plc1', host: '10.0.0.9' }, [{ variable: 'mvr_p1', table: 'holding', address: 0 }]);
    expect(parse(plc.yaml).modbus.devices[1].name).toBe('plc1_2');
    const server = mergeOpcuaNodes(text, { name: 'mixer1', endpoint: 'opc.tcp://10.0.0.6:4840' }, [{ node_id: 'i=2258', variable: 'mvr_now' }]);
    expect(server).toMatchObject({ target: 'opcua.servers[1]', created: true });
    expect(parse(server.yaml).opcua.servers[1].name).toBe('mixer1_2');
    // The same server (host case, trailing slash): extended, not added.
    const same = mergeOpcuaNodes(text, { name: 'x', endpoint: 'opc.tcp://10.0.0.5:4840/' }, [{ node_id: 'i=2258', variable: 'mvr_now' }]);
    expect(same).toMatchObject({ target: 'opcua.servers[0]', created: false, added: 1 });
  });

  it('writes a serial device with serial.path and finds it again by its port', () => {
    const rtu = { name: 'meter', transport: 'rtu' as const, path: '/dev/ttyUSB0', serial: { baud_rate: 9600, parity: 'none' as const }, unit_id: 7 };
    const first = mergeModbusRegisters('', rtu, [{ variable: 'mvr_kwh', table: 'input', address: 0, type: 'uint32' }]);
    expect(parse(first.yaml).modbus.devices[0]).toMatchObject({ name: 'meter', transport: 'rtu', serial: { path: '/dev/ttyUSB0', baud_rate: 9600, parity: 'none' }, unit_id: 7 });
    expect(first.yaml).toContain('serial: { path: /dev/ttyUSB0, baud_rate: 9600, parity: none }');
    const second = mergeModbusRegisters(first.yaml, { ...rtu, name: 'other' }, [{ variable: 'mvr_v', table: 'input', address: 2, type: 'uint16' }]);
    expect(second).toMatchObject({ target: 'modbus.devices[0]', created: false, added: 1 });
  });

  it('skips, with the reason, a variable already fed, a node already mapped, an overlapping register and the same variable twice', () => {
    const text = `${BLOCK}opcua:\n  servers:\n    - name: press1\n      endpoint: opc.tcp://10.0.0.5:4840\n      nodes:\n        - { node_id: "ns=2;s=T", variable: mvr_press_t }\n`;
    const r = mergeModbusRegisters(text, mixer, [
      { variable: 'mvr_press_t', table: 'holding', address: 20 },
      { variable: 'mvr_over', table: 'holding', address: 1, type: 'uint16' },
      { variable: 'mvr_ok', table: 'holding', address: 2, type: 'uint16' },
      { variable: 'mvr_ok', table: 'holding', address: 3, type: 'uint16' },
      { variable: 'mvr_bit_a', table: 'holding', address: 0, type: 'bit', bit: 1 },
    ]);
    expect(r.added).toBe(2);
    expect(r.skipped).toEqual([
      { what: 'holding 20', index: 0, reason: 'mvr_press_t is already mapped (opcua.servers[0].nodes[0].variable)' },
      { what: 'holding 1', index: 1, reason: 'holding register 1 (uint16) overlaps holding registers 0-1 (float32), read as mvr_mixer1_temperature' },
      { what: 'holding 3', index: 3, reason: 'mvr_ok is chosen for another register of this selection' },
    ]);
    const n = mergeOpcuaNodes(text, { name: 'press1', endpoint: 'opc.tcp://10.0.0.5:4840' }, [{ node_id: 'ns=2;s=T', variable: 'mvr_new' }]);
    expect(n).toMatchObject({ added: 0, skipped: [{ what: 'ns=2;s=T', reason: 'the node is already mapped on this server', index: 0 }] });
    expect(n.yaml).toBe(text);
  });

  it('does not count a variable that annotations only refer to as mapped (a valid configuration: the gateway\'s own list)', () => {
    const demo = readFileSync('config/demo.yaml', 'utf8').replace('machine_variables: [mvr_mixer1_running, mvr_mixer1_speed]', 'machine_variables: [mvr_mixer1_running, mvr_mixer1_speed, mvr_mixer1_torque]');
    withoutReadingSecrets(() => validateConfig(parse(demo)));
    const r = mergeModbusRegisters(demo, mixer, [
      { variable: 'mvr_mixer1_torque', table: 'holding', address: 30, type: 'uint16' },
      { variable: 'mvr_mixer1_speed', table: 'holding', address: 31, type: 'uint16' },
    ]);
    expect(r.added).toBe(1);
    expect(r.skipped).toEqual([{ what: 'holding 31', index: 1, reason: 'mvr_mixer1_speed is already mapped (modbus.devices[0].registers[1].variable)' }]);
  });
});

describe('config merge: passwords of new servers', () => {
  it('a second server with a user reads its own environment variable, not the first one\'s', () => {
    const one = mergeOpcuaNodes('', { name: 'line1', endpoint: 'opc.tcp://10.0.0.1:4840', user: 'op' }, [{ node_id: 'ns=2;s=A', variable: 'mvr_a' }]).yaml;
    expect(one).toContain('password: { env: OPCUA_PASSWORD }');
    const two = mergeOpcuaNodes(one, { name: 'line-2', endpoint: 'opc.tcp://10.0.0.2:4840', user: 'op' }, [{ node_id: 'ns=2;s=B', variable: 'mvr_b' }]).yaml;
    expect(two).toContain('password: { env: OPCUA_PASSWORD_LINE_2 }');
    expect(two.match(/env: OPCUA_PASSWORD }/g)).toHaveLength(1);
  });
});

describe('config merge: the demo configuration', () => {
  it('extends Mixer 1 and Press 1 and adds a device; the result passes the gateway\'s validation and keeps every line', () => {
    const demo = readFileSync('config/demo.yaml', 'utf8');
    let text = mergeModbusRegisters(demo, mixer, [
      { variable: 'mvr_mixer1_x', table: 'holding', address: 8, type: 'float32', byte_order: 'CDAB', comment: 'from the probe' },
      { variable: 'mvr_mixer1_power', table: 'holding', address: 20, type: 'float32' }, // already mapped
    ]).yaml;
    text = mergeModbusRegisters(text, { name: 'mixer1', transport: 'tcp', host: '127.0.0.1', port: 5021, unit_id: 1 }, [{ variable: 'mvr_mixer2_level', table: 'input', address: 0, type: 'int16', scale: 0.1 }]).yaml;
    text = mergeOpcuaNodes(text, { name: 'press1', endpoint: 'opc.tcp://127.0.0.1:4840/UA/Press1' }, [{ node_id: 'nsu=urn:edge-gateway:sim:press1;s=Press1.Extra', variable: 'mvr_press1_extra', comment: 'Press1/Extra (Double)' }]).yaml;
    const added = insertedLines(demo, text);
    expect(added).toEqual([
      // Quoted as the node ids above it, its keys at the columns of the registers above it.
      '        - { node_id: "nsu=urn:edge-gateway:sim:press1;s=Press1.Extra", variable: mvr_press1_extra } # Press1/Extra (Double)',
      '        - { variable: mvr_mixer1_x,           table: holding, address: 8, type: float32, byte_order: CDAB } # from the probe',
      '    - name: mixer1_2',
      '      transport: tcp',
      '      host: 127.0.0.1',
      '      port: 5021',
      '      unit_id: 1',
      '      registers:',
      '        - variable: mvr_mixer2_level',
      '          table: input',
      '          address: 0',
      '          type: int16',
      '          scale: 0.1',
    ]);
    const { config } = withoutReadingSecrets(() => validateConfig(parse(text)));
    expect(config.modbus!.devices.map((d) => [d.name, d.registers.length])).toEqual([
      ['mixer1', 7],
      ['mixer1_2', 1],
    ]);
    expect(config.opcua.servers[0].nodes.at(-1)!.variable).toBe('mvr_press1_extra');
  });
});
