import { defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/sequencer.js';

// Tests talk to real peers over loopback (emulator over HTTP, OPC UA, Modbus and MQTT servers),
// so they are given generous deadlines and run in separate processes. Files run longest first
// (test/sequencer.ts) so the workers stay busy to the end.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    // Deadlines, not waits: a passing test takes no longer for them. Beside other work (load 20-40
    // on 2 cores) a Chromium test that starts the CLI twice, or browses an OPC UA server, took more
    // than a minute and failed on the deadline alone.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // Two on two cores. Most files wait on peers and timers (the suite used 1.06 cores with two
    // workers), but a third worker made Chromium tests fail beside the bench smoke runs.
    maxWorkers: 2,
    reporters: ['default'],
    sequence: { sequencer: LongestFirstSequencer },
    // expect.poll gives up after 1 s by default: a page that repaints a second late on a loaded
    // machine (a browser, a gateway and a test run beside other work on 2 cores) failed a check that
    // would have passed. A poll still needs its condition to come true; it only waits longer.
    expect: { poll: { timeout: 15_000 } },
  },
});
