import { describeSmokeShard } from '../helpers/bench-smoke.js';
import { SMOKE_SHARDS } from './shards.js';

// One of SMOKE_SHARDS files that smoke-run the benchmarks (test/helpers/bench-smoke.ts).
describeSmokeShard(2, SMOKE_SHARDS);
