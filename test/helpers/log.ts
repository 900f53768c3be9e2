import { Writable } from 'node:stream';
import { createLogger } from '../../src/core/logger.js';

/** A JSON logger (debug level unless told) whose lines are kept, parsed, for assertions. */
export function captureLines(level: 'debug' | 'info' = 'debug'): { logger: ReturnType<typeof createLogger>; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _e, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { logger: createLogger({ level, format: 'json', destination: stream }), lines };
}
