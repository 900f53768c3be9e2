// The demo's device switches: shown only when the demo runs this gateway.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { DemoDevice, DemoDevicesResponse, DemoSwitchResponse } from '../api/demo.js';
import { api, messageOf } from './lib.js';

/**
 * One line per simulated device with a button that takes it down (its server or MQTT client really
 * stops, so the gateway sees it go and records a gap) or brings it back on the same port.
 * Renders nothing on a gateway that does not run the demo.
 */
export function DemoControls() {
  const [devices, setDevices] = useState<DemoDevice[] | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api<DemoDevicesResponse>('/console/api/demo').then(
      (r) => setDevices(r.demo ? r.devices : null),
      () => setDevices(null),
    );
  }, []);
  if (!devices || devices.length === 0) return null;
  const flip = async (d: DemoDevice) => {
    setBusy(d.name);
    setError(null);
    try {
      const r = await api<DemoSwitchResponse>(`/console/api/demo/devices/${encodeURIComponent(d.name)}`, { method: 'POST', body: { state: d.up ? 'down' : 'up' } });
      setDevices((all) => (all ?? []).map((x) => (x.name === r.device.name ? r.device : x)));
    } catch (e) {
      setError(`${d.label}: ${messageOf(e)}`);
    } finally {
      setBusy(null);
    }
  };
  return (
    <section class="card demo-devices" data-testid="demo-devices">
      <div class="card-head">
        <h2>Demo plant</h2>
        <span class="muted small">take a simulated device down to see a real disconnect and its gap; bring it back on the same port</span>
      </div>
      <div class="row" style="flex-wrap:wrap; gap:14px">
        {devices.map((d) => (
          <div class="row" data-testid={`demo-device-${d.name}`} title={d.what}>
            <b>{d.label}</b>
            <span class={`pill ${d.up ? 'ok' : 'bad'}`} data-testid={`demo-state-${d.name}`}>
              {d.up ? 'up' : `down since ${new Date(d.since).toLocaleTimeString('en-GB')}`}
            </span>
            <button class={d.up ? 'small danger' : 'small'} disabled={busy !== null} onClick={() => void flip(d)} data-testid={`demo-switch-${d.name}`}>
              {busy === d.name ? (d.up ? 'Stopping…' : 'Starting…') : d.up ? 'Take down' : 'Bring up'}
            </button>
          </div>
        ))}
      </div>
      {error ? <p class="err-line" data-testid="demo-error">{error}</p> : ''}
    </section>
  );
}
