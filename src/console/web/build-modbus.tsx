import { h, Fragment } from 'preact';
import { useState } from 'preact/hooks';
import type { ModbusTable, ProbeRequest, ProbeResponse } from '../api/build.js';
import { api, messageOf } from './lib.js';
import type { AddToConfig } from './page-build.js';

const ORDERS = ['ABCD', 'DCBA', 'BADC', 'CDAB'] as const;

/** The probe's form as typed: numbers stay text until sent. */
interface ProbeForm {
  device: string;
  unit_id: string;
  table: ModbusTable;
  address: string;
  count: string;
}

/** Build the config → Modbus probe: read a register range once and see it as every type × byte order. */
export function ModbusProbe({ addToConfig }: { addToConfig: AddToConfig }) {
  const [f, setF] = useState<ProbeForm>({ device: 'tcp://127.0.0.1:502', unit_id: '1', table: 'holding', address: '0', count: '8' });
  const [r, setR] = useState<ProbeResponse | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const set = (k: keyof ProbeForm) => (e: { currentTarget: HTMLInputElement | HTMLSelectElement }) => setF({ ...f, [k]: e.currentTarget.value });
  const probe = async () => {
    setBusy(true);
    setErr(null);
    try {
      const body: ProbeRequest = { device: f.device, table: f.table, unit_id: Number(f.unit_id), address: Number(f.address), count: Number(f.count) };
      setR(await api<ProbeResponse>('/console/api/modbus/probe', { method: 'POST', body }));
    } catch (e) {
      setErr(messageOf(e));
      setR(null);
    } finally {
      setBusy(false);
    }
  };
  const tables: ModbusTable[] = ['holding', 'input', 'coil', 'discrete_input'];
  return (
    <section class="card">
      <h2>Modbus: probe a register range</h2>
      <div class="form">
        <label>
          Device
          <input value={f.device} onInput={set('device')} data-testid="probe-device" />
        </label>
        <label class="narrow">
          Unit
          <input type="number" value={f.unit_id} onInput={set('unit_id')} />
        </label>
        <label class="narrow">
          Table
          <select value={f.table} onChange={set('table')}>
            {tables.map((t) => (
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
      {err ? <p class="err-line">{err}</p> : ''}
      {r && r.bits ? <p class="mono">{r.bits.join(' ')}</p> : ''}
      {r && r.registers.length > 0 ? (
        <>
          <p class="muted small">Find the value the device's display shows; its row and column are the type and byte order to configure.</p>
          <div class="mono small raw">
            {r.registers.map((w, i) => (
              <span>
                {Number(f.address) + i}: 0x{w.toString(16).toUpperCase().padStart(4, '0')}
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
              {r.candidates.map((c) => (
                <tr>
                  <td>{c.address}</td>
                  <td>{c.type}</td>
                  {ORDERS.map((o) => (
                    <td class="num mono">{c.values[o]}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ) : (
        ''
      )}
    </section>
  );
}

