import { z } from 'zod';
import { annotationsSectionSchema } from '../annotations/config.js';
import { bufferSchema } from '../buffer/config.js';
import { fleetSchema } from '../fleet/config.js';
import { gapsSchema } from '../buffer/gaps-config.js';
import { httpSchema } from '../http/config.js';
import { SOURCE_PLUGINS, sourceSectionShape } from '../sources/plugins.js';
import { storeSchema } from '../store/config.js';
import { serviceSchema, uplinkSchema } from '../uplink/config.js';
import { durationMs } from './units.js';
import { formatPath } from './issues.js';

/**
 * The whole configuration, assembled from each component's own schema. Unknown keys are refused
 * everywhere (strict objects). This schema is also the configuration reference: every field has a
 * description, a default and an example (`scripts/gen-config-docs` renders it).
 */
export const gatewaySchema = z
  .strictObject({
    gateway: z
      .strictObject({
        name: z.string().regex(/^[A-Za-z0-9_-]{1,40}$/, { error: 'must be 1-40 letters, digits, "_" or "-"' }).default('edge-gateway').meta({ description: 'Name of this gateway; prefixes annotation external ids and appears in logs', examples: ['plant-a-line-3'] }),
        data_dir: z.string().min(1).default('./data').meta({ description: 'Directory for certificates, import files and other state', examples: ['/var/lib/edge-gateway'] }),
        status_interval: durationMs({ min: 0, max: 3_600_000 }).default(5_000).meta({ description: 'Print a status line this often when running in a terminal (0: never)', examples: ['5s'] }),
      })
      .prefault({})
      .meta({ description: 'The gateway itself' }),
    log: z
      .strictObject({
        level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').meta({ description: 'Least severe level written' }),
        format: z.enum(['auto', 'json', 'pretty']).default('auto').meta({ description: 'json, pretty, or auto (pretty on a terminal, JSON otherwise)' }),
      })
      .prefault({})
      .meta({ description: 'Logging' }),
    service: serviceSchema,
    uplink: uplinkSchema.prefault({}),
    buffer: bufferSchema.prefault({}),
    store: storeSchema.prefault({}),
    http: httpSchema.prefault({}),
    ...sourceSectionShape(),
    annotations: annotationsSectionSchema,
    fleet: fleetSchema.optional(),
    gaps: gapsSchema.prefault({}),
  })
  .superRefine((c, ctx) => {
    // Issue 14 §3: a gap annotation needs the site and the outbox of the annotations section.
    if (c.gaps.annotate && !c.annotations) ctx.addIssue({ code: 'custom', path: ['gaps', 'annotate'], message: 'true needs the annotations section (its site and outbox); add annotations: {site: ...} or set gaps.annotate: false', input: true });
    // Issue 26: OPC UA events become annotations through annotations.alarms, and only there.
    const withEvents = new Set((c.opcua?.servers ?? []).filter((s) => s.events).map((s) => s.name));
    c.opcua?.servers.forEach((s, i) => {
      if (s.events && !c.annotations?.alarms) ctx.addIssue({ code: 'custom', path: ['opcua', 'servers', i, 'events'], message: 'needs annotations.alarms (where conditions become annotations); add annotations: {site: ..., alarms: {...}} or remove events', input: undefined });
    });
    c.annotations?.alarms?.servers.forEach((m, i) => {
      if (!withEvents.has(m.server)) ctx.addIssue({ code: 'custom', path: ['annotations', 'alarms', 'servers', i, 'server'], message: `"${m.server}" is not an OPC UA server with events (opcua.servers[].name with events:${withEvents.size ? `; those are ${[...withEvents].join(', ')}` : ''})`, input: m.server });
    });
    c.annotations?.alarms?.rules.forEach((r, i) => {
      if (r.match.server !== undefined && !withEvents.has(r.match.server)) ctx.addIssue({ code: 'custom', path: ['annotations', 'alarms', 'rules', i, 'match', 'server'], message: `"${r.match.server}" is not an OPC UA server with events (opcua.servers[].name with events:)`, input: r.match.server });
    });
    // Source names label metrics and status entries, so they are unique across protocols (issue 12
    // §4: a duplicate used to be refused at start without saying where the two names are).
    const named = SOURCE_PLUGINS.flatMap((p) => p.names(c[p.kind])).filter((n) => !n.device);
    const first = new Map<string, Array<string | number>>();
    for (const n of named) {
      const earlier = first.get(n.name);
      if (earlier) ctx.addIssue({ code: 'custom', path: n.path, input: n.name, message: `${JSON.stringify(n.name)} is already the name of ${formatPath(earlier)}; source names label metrics and status and must be unique` });
      else first.set(n.name, n.path);
    }
  })
  .meta({ description: 'Edge gateway configuration' });

export type GatewayConfig = z.output<typeof gatewaySchema>;
export type GatewayConfigInput = z.input<typeof gatewaySchema>;
