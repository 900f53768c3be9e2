import { h, Fragment } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { ConfiguredModbusDevice, MergeRequest, ModbusDevicesResponse, ModbusTable, ProbeRequest, ProbeResponse } from '../api/build.js';
import { describeRange, TABLE_INFO } from '../../sources/modbus/address.js';
import { CatalogList, Flags, useCatalog, useMapped, variableFlags, type VariableFlag } from './build-mapping.js';
import { api, messageOf } from './lib.js';
import type { AddToConfig } from './page-build.js';

const ORDERS = ['ABCD', 'DCBA', 'BADC', 'CDAB'] as const;
type Order = (typeof ORDERS)[number];
const TABLES: ModbusTable[] = ['holding', 'input', 'coil', 'discrete_input'];
/** Registers a value of each probed type takes (sources/modbus/decode.ts REGISTER_COUNT). */
const WORDS: Record<string, number> = { int16: 1, uint16: 1, int32: 2, uint32: 2, float32: 2, int64: 4, uint64: 4, float64: 4 };

/** The probe's form as typed: numbers stay text until sent. */
interface ProbeForm {
  device: string;
  unit_id: string;
  table: ModbusTable;
  address: string;
  count: string;
}

/** A probe answer with what was asked, so later edits of the form do not change what its cells mean. */
interface Probed {
  response: ProbeResponse;
  device: string;
  unit_id: number;
  address: number;
}

/** A cell picked to become a mapping line: one per register (or bit) of the probed device. */
interface Pick {
  table: ModbusTable;
  address: number;
  /** Undefined for a coil or discrete input (a bool). */
  type?: string;
  order?: Order;
  value: string;
  variable: string;
  scale: string;
}

const pickKey = (p: { table: ModbusTable; address: number }) => `${p.table}:${p.address}`;

/**
 * Build the config → Modbus probe: read a register range once and see it as every type × byte
 * order; the cell that shows the device's value becomes a mapping line (issue 24 §3). The form
 * starts on the running configuration's first device; any other device can be typed.
 */
export function ModbusProbe({ addToConfig, text }: { addToConfig: AddToConfig; text: string }) {
  const [f, setF] = useState<ProbeForm>({ device: 'tcp://127.0.0.1:502', unit_id: '1', table: 'holding', address: '0', count: '8' });
  // Typed in before the device list came: the list does not overwrite it.
  const touched = useRef(false);
  const [devices, setDevices] = useState<ConfiguredModbusDevice[]>([]);
  const [probed, setProbed] = useState<Probed | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [picks, setPicks] = useState<Pick[]>([]);
  const [newName, setNewName] = useState('device1');
  const catalog = useCatalog();
  // Read only while there are lines to flag: the text may be large and change at every key.
  const mapped = useMapped(picks.length ? text : '');

  useEffect(() => {
    api<ModbusDevicesResponse>('/console/api/modbus/devices').then(
      (r) => {
        setDevices(r.devices);
        const first = r.devices[0];
        if (first && !touched.current) setF((old) => ({ ...old, device: first.url, unit_id: String(first.unit_id) }));
      },
      () => setDevices([]),
    );
  }, []);

  /** The configured device the form names (same URL and unit), if any. */
  const configuredFor = (url: string, unit: number) => devices.find((d) => d.url === url.trim() && d.unit_id === unit);
  const chosen = configuredFor(f.device, Number(f.unit_id));
  const set = (k: keyof ProbeForm) => (e: { currentTarget: HTMLInputElement | HTMLSelectElement }) => {
    touched.current = true;
    setF({ ...f, [k]: e.currentTarget.value });
  };
  const choose = (name: string) => {
    touched.current = true;
    const d = devices.find((x) => x.name === name);
    if (d) setF({ ...f, device: d.url, unit_id: String(d.unit_id) });
    else setF({ ...f, device: '' });
  };

  const probe = async () => {
    setBusy(true);
    setErr(null);
    try {
      const body: ProbeRequest = { device: f.device.trim(), table: f.table, unit_id: Number(f.unit_id), address: Number(f.address), count: Number(f.count) };
      const response = await api<ProbeResponse>('/console/api/modbus/probe', { method: 'POST', body });
      // Picks belong to one device: another device starts a new list.
      if (probed && (probed.device !== body.device || probed.unit_id !== body.unit_id)) setPicks([]);
      setProbed({ response, device: body.device, unit_id: body.unit_id!, address: body.address });
    } catch (e) {
      setErr(messageOf(e));
      setProbed(null);
    } finally {
      setBusy(false);
    }
  };

  const target = probed ? configuredFor(probed.device, probed.unit_id) : undefined;
  const base = target?.address_base ?? 0;
  /** The register of the configured device this pick overlaps (the planner's rule: bit values aside, no two values share a register). */
  const readAlready = (p: Pick) => {
    const words = p.type ? (WORDS[p.type] ?? 1) : 1;
    return target?.registers.find((r) => r.table === p.table && r.type !== 'bit' && r.address < p.address + words && p.address < r.address + r.count);
  };

  /** Clicking a cell picks it (its type and order replace an earlier pick of the same register); clicking it again drops it. */
  const pick = (p: Omit<Pick, 'variable' | 'scale'>) => {
    const at = picks.findIndex((x) => pickKey(x) === pickKey(p));
    if (at >= 0 && picks[at].type === p.type && picks[at].order === p.order) {
      setPicks(picks.filter((_, i) => i !== at));
      return;
    }
    const next = { ...p, variable: at >= 0 ? picks[at].variable : '', scale: at >= 0 ? picks[at].scale : '' };
    setPicks(at >= 0 ? picks.map((x, i) => (i === at ? next : x)) : [...picks, next]);
  };
  const edit = (i: number, change: Partial<Pick>) => setPicks(picks.map((x, j) => (j === i ? { ...x, ...change } : x)));
  const isPicked = (table: ModbusTable, address: number, type?: string, order?: Order) => picks.some((x) => x.table === table && x.address === address && x.type === type && x.order === order);

  const flagsOf = (p: Pick, i: number): VariableFlag[] => {
    const flags = variableFlags(p.variable, { catalog, mapped, chosenTwice: picks.some((x, j) => j !== i && x.variable.trim() === p.variable.trim()) });
    const r = readAlready(p);
    if (r) flags.push({ level: 'warn', text: `${describeRange(r.table, r.address, r.count, base)} is read already as ${r.variable} (${r.type}): it would be left out` });
    if (p.scale.trim() && !Number.isFinite(Number(p.scale))) flags.push({ level: 'bad', text: 'scale is not a number' });
    return flags;
  };
  const blocked =
    picks.length === 0
      ? 'pick the cells that show the device’s values'
      : picks.some((p, i) => flagsOf(p, i).some((x) => x.level === 'bad'))
        ? 'every line needs a machine variable id (and a number as scale)'
        : !target && !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(newName.trim())
          ? 'name the new device (letters, digits, _ . -)'
          : null;

  const add = async () => {
    if (!probed || blocked) return;
    setErr(null);
    const unitOf = (id: string) => catalog?.variables.find((c) => c.id === id)?.unit ?? undefined;
    const modbus: NonNullable<MergeRequest['modbus']> = {
      // A configured device by its name (the merge extends it); another by its URL and the name typed.
      device: { name: target?.name ?? newName.trim(), url: probed.device, unit_id: probed.unit_id },
      registers: picks.map((p) => ({
        variable: p.variable.trim(),
        table: p.table,
        address: p.address,
        ...(p.type ? { type: p.type } : {}),
        ...(p.order ? { byte_order: p.order } : {}),
        ...(p.scale.trim() ? { scale: Number(p.scale) } : {}),
        // A register has no unit of its own: the catalog's, written as the mapping's unit setting.
        ...(unitOf(p.variable.trim()) ? { unit: unitOf(p.variable.trim())! } : {}),
      })),
    };
    try {
      await addToConfig({ modbus });
      setPicks([]);
    } catch (e) {
      setErr(messageOf(e));
    }
  };

  const r = probed?.response;
  const startAt = probed?.address ?? 0;
  const bitsTable = r ? TABLE_INFO[r.table].bits : false;
  return (
    <section class="card">
      <h2>Modbus: probe a register range</h2>
      <div class="form">
        {devices.length ? (
          <label class="narrow wide">
            Configured device
            <select value={chosen?.name ?? ''} onChange={(e) => choose(e.currentTarget.value)} data-testid="probe-configured">
              {devices.map((d) => (
                <option value={d.name}>
                  {d.name} ({d.url.replace(/\?.*$/, '')}, unit {d.unit_id})
                </option>
              ))}
              <option value="">Another device…</option>
            </select>
          </label>
        ) : (
          ''
        )}
        <label>
          Device
          <input value={f.device} onInput={set('device')} placeholder="tcp://HOST:502, rtu-over-tcp://HOST:PORT, rtu:/dev/ttyUSB0?baud=9600" data-testid="probe-device" />
        </label>
        <label class="narrow">
          Unit
          <input type="number" value={f.unit_id} onInput={set('unit_id')} data-testid="probe-unit" />
        </label>
        <label class="narrow">
          Table
          <select value={f.table} onChange={set('table')} data-testid="probe-table-select">
            {TABLES.map((t) => (
              <option>{t}</option>
            ))}
          </select>
        </label>
        <label class="narrow">
          Address
          <input type="number" value={f.address} onInput={set('address')} data-testid="probe-address" />
        </label>
        <label class="narrow">
          Count
          <input type="number" value={f.count} onInput={set('count')} />
        </label>
        <button class="primary" onClick={probe} disabled={busy} data-testid="probe-run">
          {busy ? 'Reading…' : 'Read'}
        </button>
      </div>
      {err ? (
        <p class="err-line" data-testid="probe-error">
          {err}
        </p>
      ) : (
        ''
      )}
      {r && bitsTable && r.bits ? (
        <>
          <p class="muted small">Click the {TABLE_INFO[r.table].plural} to map: each becomes a bool mapping line.</p>
          <div class="raw mono" data-testid="probe-bits">
            {r.bits.map((b, i) => (
              <button class={`bit ${isPicked(r.table, startAt + i) ? 'on' : ''}`} onClick={() => pick({ table: r.table, address: startAt + i, value: String(b) })} data-testid={`bit-${startAt + i}`}>
                {startAt + i}: {b}
              </button>
            ))}
          </div>
        </>
      ) : (
        ''
      )}
      {r && r.registers.length > 0 ? (
        <>
          <p class="muted small">Find the value the device's display shows and click it: its row and column are the type and byte order, and it becomes a mapping line below.</p>
          <div class="mono small raw">
            {r.registers.map((w, i) => (
              <span>
                {startAt + i}: 0x{w.toString(16).toUpperCase().padStart(4, '0')}
              </span>
            ))}
          </div>
          <table class="tbl" data-testid="probe-table">
            <thead>
              <tr>
                <th>Address</th>
                <th>Type</th>
                {ORDERS.map((o) => (
                  <th class="num">{o}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {r.candidates.map((c) => {
                const read = target?.registers.find((x) => x.table === r.table && x.address === c.address);
                return (
                  <tr>
                    <td>
                      {c.address}
                      {read ? <span class="muted small"> · read as {read.variable}</span> : ''}
                    </td>
                    <td>{c.type}</td>
                    {ORDERS.map((o) => (
                      <td class={`num mono pick ${isPicked(r.table, c.address, c.type, o) ? 'on' : ''}`} onClick={() => pick({ table: r.table, address: c.address, type: c.type, order: o, value: c.values[o] })} title={`map ${c.type} ${o} at ${c.address}`} data-testid={`cell-${c.address}-${c.type}-${o}`}>
                        {c.values[o]}
                      </td>
                    ))}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </>
      ) : (
        ''
      )}
      {picks.length ? (
        <div class="preview" data-testid="probe-picks">
          <h3>
            Mapping lines for {target ? <span class="mono">{target.name}</span> : 'a new device'} ({probed?.device}, unit {probed?.unit_id})
          </h3>
          <CatalogList id="mvars-modbus" catalog={catalog} />
          <table class="tbl">
            <thead>
              <tr>
                <th>Register</th>
                <th>Type</th>
                <th>Value</th>
                <th>Machine variable</th>
                <th>Scale</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {picks.map((p, i) => (
                <tr data-testid={`pick-${p.table}-${p.address}`}>
                  <td class="mono">
                    {p.table} {p.address + base}
                  </td>
                  <td class="mono">{p.type ? `${p.type} ${p.order}` : 'bool'}</td>
                  <td class="mono">{p.value}</td>
                  <td>
                    <input class="mvar mono" list="mvars-modbus" value={p.variable} placeholder="mvr_…" onInput={(e) => edit(i, { variable: e.currentTarget.value })} data-testid={`pick-var-${p.table}-${p.address}`} />
                    <Flags flags={flagsOf(p, i)} testid={`pick-flags-${p.table}-${p.address}`} />
                  </td>
                  <td>
                    <input class="narrow-input mono" value={p.scale} placeholder="1" onInput={(e) => edit(i, { scale: e.currentTarget.value })} data-testid={`pick-scale-${p.table}-${p.address}`} />
                  </td>
                  <td>
                    <button onClick={() => setPicks(picks.filter((_, j) => j !== i))} title="drop this line">
                      ×
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <div class="form">
            {target ? (
              ''
            ) : (
              <label class="narrow">
                Device name
                <input value={newName} onInput={(e) => setNewName(e.currentTarget.value)} data-testid="probe-device-name" />
              </label>
            )}
            <button class="primary" disabled={blocked !== null} title={blocked ?? undefined} onClick={add} data-testid="add-modbus">
              Add {picks.length} register{picks.length === 1 ? '' : 's'} to the configuration
            </button>
            {blocked ? <span class="muted small">{blocked}</span> : ''}
          </div>
        </div>
      ) : (
        ''
      )}
    </section>
  );
}
