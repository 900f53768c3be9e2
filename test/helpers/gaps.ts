import { expect } from 'vitest';
import type { GapView } from '../../src/buffer/gaps.js';
import type { TestGateway } from './gateway.js';

/** The gap ledger as the local API serves it (GET /api/gaps, the console's contract). */
export async function apiGaps(gw: TestGateway, query = 'state=all&limit=50'): Promise<GapView[]> {
  const res = await fetch(`${gw.handle.httpUrl}/api/gaps?${query}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { gaps: GapView[] }).gaps;
}
