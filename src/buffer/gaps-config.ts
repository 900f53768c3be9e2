import { z } from 'zod';
import { durationMs } from '../config/units.js';

/**
 * The `gaps:` section: whether gaps the history could not fill become range
 * annotations upstream. The ledger itself (src/buffer/gaps.ts) is always kept.
 */
export const gapsSchema = z
  .strictObject({
    annotate: z
      .boolean()
      .default(false)
      .meta({ description: 'Turn every closed gap that history did not fill (fully) and that lasted at least min_duration into a range annotation (§2.3) on the machine data, through the annotation outbox. Needs the annotations section (its site)' }),
    min_duration: durationMs({ min: 0, max: 30 * 86_400_000 })
      .default(60_000)
      .meta({ description: 'Shorter gaps are recorded but not annotated', examples: ['60s', '5m'] }),
  })
  .meta({ description: 'Gaps in the data (edge-gateway gaps list, /api/gaps) and whether the cloud sees them as annotations' });

export type GapsConfig = z.output<typeof gapsSchema>;
