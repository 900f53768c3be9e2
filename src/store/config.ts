import { z } from 'zod';
import { byteSize } from '../config/units.js';

const MiB = 1_048_576;

/**
 * The `store:` section: the space of each table in the gateway's file that is not the sample
 * buffer (src/store/README.md S5). The samples have their own bound, buffer.max_bytes; none of
 * these counts against it, and none of them can push a sample out.
 */
export const storeSchema = z
  .strictObject({
    annotations_max_bytes: byteSize({ min: 1 * MiB })
      .default(64 * MiB)
      .meta({
        description:
          'Space of the annotation outbox and the open downtimes. When full, delivered and refused annotations go first, oldest first (also before annotations.retention); annotations still queued are never deleted. Beyond that new annotations and new downtimes are refused: HTTP 507 with the reason from the annotations API, and on the MQTT trigger the message is acknowledged, logged and counted (gateway_annotation_trigger_messages_total{outcome="store_full"}). Stopping a downtime that is open, and the end of a machine condition, are always taken',
        examples: ['64MB'],
      }),
    alarms_max_bytes: byteSize({ min: 1 * MiB })
      .default(64 * MiB)
      .meta({
        description:
          'Space of the machine conditions (annotations.alarms: activations, links, flags). When full, conditions that ended (their annotation is in the outbox already) and old links and flags go first, oldest first. Beyond that new activations are refused and counted (gateway_alarm_events_refused_total{reason="store_full"}); conditions that are active still end and get their annotation',
        examples: ['64MB'],
      }),
    gaps_max_bytes: byteSize({ min: 1 * MiB })
      .default(16 * MiB)
      .meta({ description: 'Space of the gap ledger. When full, the oldest closed gaps are deleted (counted in gateway_store_removed_rows_total{owner="gaps"}); open gaps are kept. A new gap is refused (logged, counted) only when open gaps alone fill it', examples: ['16MB'] }),
    set_aside_max_bytes: byteSize({ min: 1 * MiB })
      .default(256 * MiB)
      .meta({
        description:
          'Space of the samples the service refused (set aside for the operator: edge-gateway set-aside list, requeue, drop). When a set-aside goes over it, the oldest set-aside samples are deleted and counted (gateway_set_aside_dropped_samples_total{reason="store_full"}); setting aside itself never fails, so a refused sample never goes back to the queue',
        examples: ['256MB'],
      }),
    trend_max_bytes: byteSize({ min: 1 * MiB })
      .default(64 * MiB)
      .meta({ description: 'Space of the console trend kept across restarts (the last ~11 minutes of min/max/count per variable). When full, the oldest rows go first; a part larger than the whole space is not kept (said once in the log). About 9-11 bytes per variable and 10 s bucket', examples: ['64MB'] }),
    disk_reserve: byteSize({ min: 0, max: 1024 * MiB })
      .default(8 * MiB)
      .meta({
        description:
          'A file of this size kept beside the buffer (<buffer.path>.reserve) while the disk has room. When the disk is full it is given back at once, so that the gateway can still start, open its file and deliver its backlog (delivering deletes rows, which SQLite writes first); new samples are refused meanwhile, with that reason. Once the disk has the reserve and 1 MB more free again, the reserve is made again and intake resumes by itself. 0: no reserve (a full disk may then keep the backlog from being delivered until space is freed by hand)',
        examples: ['8MB', '0'],
      }),
  })
  .meta({ description: "Space in the gateway's SQLite file for what is not the sample buffer, and the disk reserve" });

export type StoreConfig = z.output<typeof storeSchema>;

/** The owners' bounds from the section (the samples' bound is buffer.max_bytes). */
export function storeLimits(c: StoreConfig): Record<string, number> {
  return { annotations: c.annotations_max_bytes, alarms: c.alarms_max_bytes, gaps: c.gaps_max_bytes, set_aside: c.set_aside_max_bytes, trend: c.trend_max_bytes };
}
