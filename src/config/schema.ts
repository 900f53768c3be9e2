import { z } from 'zod';
import { annotationsSectionSchema } from '../annotations/config.js';
import { bufferSchema } from '../buffer/config.js';
import { gapsSchema } from '../buffer/gaps-config.js';
import { httpSchema } from '../http/config.js';
import { generatorSectionSchema } from '../sources/generator/config.js';
import { modbusSectionSchema } from '../sources/modbus/config.js';
import { mqttSectionSchema } from '../sources/mqtt/config.js';
import { opcuaSectionSchema } from '../sources/opcua/config.js';
import { serviceSchema, uplinkSchema } from '../uplink/config.js';
import { durationMs } from './units.js';

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
    http: httpSchema.prefault({}),
    generator: generatorSectionSchema,
    opcua: opcuaSectionSchema,
    modbus: modbusSectionSchema,
    mqtt: mqttSectionSchema,
    annotations: annotationsSectionSchema,
    gaps: gapsSchema.prefault({}),
  })
  .superRefine((c, ctx) => {
    // Issue 14 §3: a gap annotation needs the site and the outbox of the annotations section.
    if (c.gaps.annotate && !c.annotations) ctx.addIssue({ code: 'custom', path: ['gaps', 'annotate'], message: 'true needs the annotations section (its site and outbox); add annotations: {site: ...} or set gaps.annotate: false', input: true });
  })
  .meta({ description: 'Edge gateway configuration' });

export type GatewayConfig = z.output<typeof gatewaySchema>;
export type GatewayConfigInput = z.input<typeof gatewaySchema>;
