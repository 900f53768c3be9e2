import { count, isRecord, list, num, str } from '../../core/untyped.js';
import { definePlugin, namesIn, type NamedEntry, type UseVariable } from '../plugin.js';
import { mqttSectionSchema, subscriptionVariables, type MqttSubscriptionConfig } from './config.js';

/** A record key as a path segment: `.name` when it is a plain word, else `["Packer1.Rate"]`. */
function keySegment(key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/** The variables one subscription maps (every form); true when it also takes variables not written in the config. */
function subscriptionUses(s: MqttSubscriptionConfig, at: string, use: (id: string, path: () => string, unit?: string) => void): boolean {
  switch (s.format) {
    case 'number':
      if (s.variable) use(s.variable, () => `${at}.variable`, s.unit);
      for (const [key, id] of Object.entries(s.variable_from_topic?.variables ?? {})) use(id, () => `${at}.variable_from_topic.variables${keySegment(key)}`, s.unit);
      return false;
    case 'json':
      s.values.forEach((v, k) => use(v.variable, () => `${at}.values[${k}].variable`, v.unit));
      return false;
    // A metrics or Sparkplug subscription stores a metric named `mvr_...` under that id without a mapping entry.
    case 'metrics':
      for (const [name, id] of Object.entries(s.names)) use(id, () => `${at}.names${keySegment(name)}`);
      return true;
    case 'sparkplug':
      s.metrics.forEach((m, k) => use(m.variable, () => `${at}.metrics[${k}].variable`, m.unit));
      return true;
  }
}

/** MQTT broker connections and the embedded broker; the mqtt client and aedes are loaded only when configured. */
export const mqttPlugin = definePlugin({
  kind: 'mqtt',
  label: 'MQTT',
  schema: mqttSectionSchema,
  async create(section, makeContext) {
    if (!section) return [];
    // Without the embedded broker, its modules (aedes, ws) are not loaded at all.
    return section.broker?.enabled ? (await import('./index.js')).createMqttSources(section, makeContext) : (await import('./remote-sources.js')).createRemoteMqttSources(section, makeContext);
  },
  inventory: (section) => (section?.connections ?? []).map((c) => [c.name, { variables: c.subscriptions.flatMap(subscriptionVariables), devices: new Map(), historyAuto: false }]),
  mappedVariables(section, use: UseVariable) {
    const openEnded: string[] = [];
    section?.connections.forEach((c, i) =>
      c.subscriptions.forEach((s, j) => {
        const at = `mqtt.connections[${i}].subscriptions[${j}]`;
        if (subscriptionUses(s, at, (id, path, unit) => use(id, i, path, unit))) openEnded.push(at);
      }),
    );
    return openEnded;
  },
  mappingSource: (section, index) => {
    const c = section?.connections[index];
    return c ? { name: c.name, onChange: true } : undefined;
  },
  names(section) {
    if (!isRecord(section)) return [];
    const broker = section.broker;
    const own: NamedEntry[] = isRecord(broker) && broker.enabled === true && typeof broker.name === 'string' ? [{ path: ['mqtt', 'broker', 'name'], name: broker.name }] : [];
    return [...own, ...namesIn(section.connections, ['mqtt', 'connections'])];
  },
  statusSummary(d) {
    if (d.listening !== undefined) return `embedded broker, ${count(num(d.clients) ?? 0)} clients, ${count(num(d.messages) ?? 0)} messages`;
    const subs = list(d.subscriptions).length;
    const pending = num(d.pending_messages);
    const unmatched = num(d.unmatched_messages);
    return `${str(d.url) ?? '?'}, ${subs} subscription${subs === 1 ? '' : 's'}${pending ? `, ${count(pending)} pending` : ''}${unmatched ? `, ${count(unmatched)} unmatched` : ''}`;
  },
});
