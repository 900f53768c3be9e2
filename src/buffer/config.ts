import { z } from 'zod';
import { byteSize, durationMs } from '../config/units.js';

export const bufferSchema = z
  .strictObject({
    path: z.string().min(1).default('./data/buffer.db').meta({ description: 'SQLite file holding every sample until the service has it; relative paths are relative to the working directory', examples: ['/var/lib/edge-gateway/buffer.db'] }),
    commit_interval: durationMs({ min: 1, max: 1_000 }).default(100).meta({ description: 'Group commit: samples arriving within this time are written in one transaction', examples: ['100ms'] }),
    synchronous: z.enum(['full', 'normal']).default('full').meta({ description: 'SQLite synchronous mode. full survives power loss; normal survives process crashes only' }),
    max_bytes: byteSize({ min: 1_000_000 }).default(2_000_000_000).meta({ description: 'Largest size of the buffer; what happens beyond it is set by when_full', examples: ['2GB'] }),
    when_full: z.enum(['drop_oldest', 'refuse_new']).default('drop_oldest').meta({ description: 'drop_oldest deletes the oldest unsent samples to make room. refuse_new keeps what is stored and refuses new samples back to their source, which is never acknowledged for them: an MQTT QoS 1/2 message comes again once there is room (persistent session), a set-aside requeue stops and keeps the rest set aside, a history backfill stays pending; values a source cannot offer again (polls, subscriptions, QoS 0) are lost. Losses are counted and logged' }),
    seal_after: durationMs({ min: 1_000, max: 86_400_000 }).default(120_000).meta({ description: 'Samples committed at least this long ago are sealed into compressed per-variable chunks (lossless; about 1-2 bytes per sample instead of about 25). The newest samples stay rows, which the live sync path sends', examples: ['2m'] }),
    seal_rows: z.number().int().min(1_000).max(10_000_000).default(100_000).meta({ description: 'Most samples one sealing job takes. Sealing runs on its own schedule, never inside a commit: a job reads and encodes its rows in slices of at most 50 ms between commits and replaces them in one transaction sized to fit a slice (measured on the machine), so it may take fewer. Chunk size does not depend on it: small chunks of one variable from several jobs are merged later (compaction); rows of a partial job are sealed once the oldest waited twice seal_after, also on an idle gateway', examples: [100_000] }),
    compact_samples: z.number().int().min(1_000).max(50_000_000).default(2_000_000).meta({ description: 'Most samples in one compaction window, which sets the chunk size: a variable\'s small chunks inside a window are merged into chunks of up to 4,096 samples, and a window\'s chunks are ordered to fill SQLite\'s pages. A window is also cut so that its commit fits a 50 ms slice (measured on the machine); it is merged in slices between commits. Larger windows give larger chunks for many variables at the price of more memory during one (the window\'s encoded chunks, ~2 bytes per sample)', examples: [2_000_000] }),
  })
  .meta({ description: 'The durable store-and-forward buffer' });

export type BufferConfig = z.output<typeof bufferSchema>;
