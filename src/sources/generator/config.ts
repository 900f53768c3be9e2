import { z } from 'zod';
import { durationMs } from '../../config/units.js';
import { machineVariableId, sourceName } from '../common-schema.js';

export const generatorSourceSchema = z
  .strictObject({
    name: sourceName,
    variables: z
      .union([
        z.array(machineVariableId).min(1),
        z.strictObject({
          prefix: z.string().regex(/^mvr_[A-Za-z0-9_]*$/, { error: 'must start with mvr_' }).meta({ description: 'Id prefix; variable i is <prefix><i>' }),
          count: z.number().int().min(1).max(1_000_000),
          start: z.number().int().min(0).default(1),
        }),
      ])
      .meta({ description: 'Machine variables to generate: a list of ids, or {prefix, count, start} for many', examples: [['mvr_demo_temp'], { prefix: 'mvr_gen_', count: 100 }] }),
    interval: durationMs({ min: 1, max: 3_600_000 }).default(1_000).meta({ description: 'One sample per variable every interval', examples: ['1s'] }),
    shape: z.enum(['sine', 'random_walk', 'counter', 'square']).default('sine').meta({ description: 'Waveform of the generated values' }),
  })
  .meta({ description: 'Synthetic samples for demos and tests' });

export const generatorSectionSchema = z.array(generatorSourceSchema).default([]).meta({ description: 'Synthetic sample generators' });

export type GeneratorSourceConfig = z.output<typeof generatorSourceSchema>;

export function generatorVariables(cfg: GeneratorSourceConfig): string[] {
  if (Array.isArray(cfg.variables)) return cfg.variables;
  const { prefix, count, start } = cfg.variables;
  return Array.from({ length: count }, (_, i) => `${prefix}${start + i}`);
}
