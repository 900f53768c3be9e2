import { h } from 'preact';
import type { AnnotationView, PanelMachine } from '../api-model.js';
import { hhmm } from '../../web/format.js';

/** The newest entries of the outbox with their delivery state: queued offline, sending, delivered, refused with the service's reason. */
export function Entries({ entries, machines, linkOk }: { entries: AnnotationView[]; machines: PanelMachine[]; linkOk: boolean }) {
  if (entries.length === 0)
    return (
      <ul id="entries" data-testid="entries">
        <li class="empty">Nothing yet.</li>
      </ul>
    );
  const names = new Map(machines.map((m) => [m.key, m.name]));
  return (
    <ul id="entries" data-testid="entries">
      {entries.map((e) => {
        const when = e.type === 'range' ? `${hhmm(Date.parse(e.started_at!))}–${hhmm(Date.parse(e.ended_at!))}` : hhmm(Date.parse(e.occurred_at!));
        const [cls, label] = e.state === 'delivered' ? ['delivered', 'Delivered'] : e.state === 'refused' ? ['refused', 'Refused'] : !linkOk || e.attempts > 0 ? ['queued', 'Queued (offline)'] : ['sending', 'Sending…'];
        return (
          <li key={e.external_id} data-testid={`entry-${e.external_id}`} data-state={e.state}>
            <div class="meta">
              <span>{when + (e.machine ? ` · ${names.get(e.machine) ?? e.machine}` : '')}</span>
              <span class={`badge ${cls}`} data-testid={`badge-${e.external_id}`}>
                {label}
              </span>
            </div>
            <div class="txt">{e.text}</div>
            {e.state === 'refused' && e.refusal ? <div class="refusal">{e.refusal}</div> : ''}
          </li>
        );
      })}
    </ul>
  );
}
