/** Writes `n` old samples into a buffer file, as a gateway offline for days would have. */
import { openBufferDatabase } from '../src/store/file/database.js';
import { SampleBuffer } from '../src/buffer/sample-buffer.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../src/runtime/store-schemas.js';

export async function prefillBuffer(path: string, n: number, variables: string[], startTs: number, stepMs = 1_000): Promise<void> {
  const logger = silentLogger();
  const { db } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'normal', logger, integrityCheck: false });
  const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 100, maxBytes: 1e13, whenFull: 'drop_oldest', logger, metrics: createMetrics(), clock: systemClock });
  const nv = variables.length;
  const chunk = 100_000;
  for (let i = 0; i < n; i += chunk) {
    const m = Math.min(chunk, n - i);
    const batch = new Array(m);
    for (let k = 0; k < m; k++) {
      const j = i + k;
      batch[k] = { variable: variables[j % nv], ts: startTs + Math.floor(j / nv) * stepMs, value: (j % 1000) * 0.25 };
    }
    await buffer.append(batch);
  }
  await buffer.close();
}
