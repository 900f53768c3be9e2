import { isRecord, list, rec, str } from '../../core/untyped.js';
import { definePlugin, namesIn, type NamedEntry } from '../plugin.js';
import { modbusSectionSchema } from './config.js';

const isUp = (state: unknown) => state === 'connected' || state === 'degraded';

/** Modbus TCP and RTU: one source (the section's name) with its devices; modbus-serial is loaded only when configured. */
export const modbusPlugin = definePlugin({
  kind: 'modbus',
  label: 'Modbus',
  schema: modbusSectionSchema,
  create: async (section, makeContext) => (section ? (await import('./index.js')).createModbusSources(section, makeContext) : []),
  inventory(section) {
    if (!section) return [];
    const devices = new Map(section.devices.map((d) => [d.name, d.registers.map((r) => r.variable)]));
    return [[section.name, { variables: [...devices.values()].flat(), devices, historyAuto: false }]];
  },
  mappedVariables(section, use) {
    section?.devices.forEach((d, i) => d.registers.forEach((r, j) => use(r.variable, i, () => `modbus.devices[${i}].registers[${j}].variable`, r.unit)));
    return [];
  },
  // A mapping's entry is a device; it is named by the device's name, polled on a period.
  mappingSource: (section, index) => {
    const d = section?.devices[index];
    return d ? { name: d.name, onChange: false } : undefined;
  },
  names(section) {
    if (!isRecord(section)) return [];
    const own: NamedEntry[] = typeof section.name === 'string' ? [{ path: ['modbus', 'name'], name: section.name }] : [];
    return [...own, ...namesIn(section.devices, ['modbus', 'devices']).map((e): NamedEntry => ({ ...e, device: true }))];
  },
  statusSummary(d) {
    const devices = list(d.devices).map(rec);
    if (devices.length === 0) return null;
    const up = devices.filter((x) => isUp(x.state)).length;
    const down = devices.filter((x) => !isUp(x.state)).map((x) => `${str(x.name)} ${str(x.state)}`);
    return `${up}/${devices.length} devices up${down.length ? ` (${down.join(', ')})` : ''}`;
  },
});
