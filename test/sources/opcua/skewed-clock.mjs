/**
 * Preload (`node --import ./skewed-clock.mjs ...`) that makes this process's wall clock run
 * `SKEWED_CLOCK_OFFSET_MS` milliseconds ahead (negative: behind) of the real one, like a PLC whose
 * clock was set wrong. Plain JavaScript so it runs before tsx and before node-opcua is loaded:
 * node-opcua captures `Date.now()` at module load (node-opcua-date-time `refTime`).
 *
 * Only the wall clock moves: `Date.now()`, `new Date()` and `Date()` (called without `new`).
 * `new Date(x)` with an argument is untouched, and so are `process.hrtime` and `performance.now()`,
 * which node-opcua uses only for intervals (getCurrentClock = hrtime since `origin` + `refTime`).
 *
 * A Proxy rather than a subclass: `Date.prototype` stays the same object, so `instanceof Date`
 * holds for dates made by Node internals with the original constructor.
 */
const offset = Number(process.env.SKEWED_CLOCK_OFFSET_MS ?? '0');
if (!Number.isFinite(offset)) throw new Error(`SKEWED_CLOCK_OFFSET_MS: "${process.env.SKEWED_CLOCK_OFFSET_MS}" is not a number of milliseconds`);

const RealDate = globalThis.Date;
const realNow = RealDate.now.bind(RealDate);
const skewedNow = () => realNow() + offset;

globalThis.Date = new Proxy(RealDate, {
  construct(target, args, newTarget) {
    return Reflect.construct(target, args.length === 0 ? [skewedNow()] : args, newTarget);
  },
  apply() {
    return new RealDate(skewedNow()).toString();
  },
  get(target, key, receiver) {
    if (key === 'now') return skewedNow;
    return Reflect.get(target, key, receiver);
  },
});
