import type { BufferReadout } from '../buffer/views.js';

/**
 * What the console reads from the buffer, and nothing more: the size of the queue and the
 * set-aside counts per variable (the Variables page's delivery column, the overview's backlog).
 * The routes see only this interface; the buffer's tables stay the buffer's business.
 */
export interface ConsoleBufferReads {
  /** Unsent samples and the time stamp of the oldest (the queue is sent oldest first). */
  queue(): { rows: number; oldestTs: number | null };
  /** Samples set aside, by variable (at most 50,000 variables). */
  setAsideByVariable(): ReadonlyMap<string | null, number>;
}

/** The console's reads, over the buffer's readout and its set-aside counts (built by the runtime, which has the buffer). */
export function consoleBufferReads(buffer: Pick<BufferReadout, 'stats'> & { readonly setAsideStore: { countsByVariable(): ReadonlyMap<string | null, number> } }): ConsoleBufferReads {
  return {
    queue: () => {
      const s = buffer.stats();
      return { rows: s.rows, oldestTs: s.oldestTs };
    },
    setAsideByVariable: () => buffer.setAsideStore.countsByVariable(),
  };
}
