import { describe, expect, it } from 'vitest';
import { inFlight } from '../../src/core/in-flight.js';

/** A call that answers when the test says so, to see how many run at once. */
function gate() {
  const waiting: Array<{ item: number; answer: (err?: Error) => void }> = [];
  const work = (item: number) => new Promise<void>((resolve, reject) => waiting.push({ item, answer: (err) => (err ? reject(err) : resolve()) }));
  return { waiting, work };
}
const turn = () => new Promise((r) => setImmediate(r));

describe('inFlight', () => {
  it('keeps at most `limit` calls running, starts them in order, and resolves when all answered', async () => {
    const g = gate();
    let done = false;
    const all = inFlight([1, 2, 3, 4, 5, 6, 7], 3, g.work).then(() => (done = true));
    await turn();
    expect(g.waiting.map((w) => w.item)).toEqual([1, 2, 3]);
    // The second answers first: one more starts, still three running.
    g.waiting[1].answer();
    await turn();
    expect(g.waiting.map((w) => w.item)).toEqual([1, 2, 3, 4]);
    for (let i = 0; i < 7; i++) {
      for (const w of g.waiting.splice(0)) w.answer();
      await turn();
    }
    await all;
    expect(done).toBe(true);
  });

  it('rejects with the first failure and starts nothing after it', async () => {
    const g = gate();
    const all = inFlight([1, 2, 3, 4, 5], 2, g.work);
    const outcome = all.catch((err: Error) => err.message);
    await turn();
    g.waiting[0].answer(new Error('BadTooManyOperations'));
    await turn();
    g.waiting[1].answer();
    expect(await outcome).toBe('BadTooManyOperations');
    expect(g.waiting.map((w) => w.item)).toEqual([1, 2]);
  });

  it('an empty list resolves at once; a limit of 0 still runs one at a time', async () => {
    await expect(inFlight([], 4, async () => {})).resolves.toBeUndefined();
    const seen: number[] = [];
    await inFlight([1, 2], 0, async (x) => void seen.push(x));
    expect(seen).toEqual([1, 2]);
  });
});
