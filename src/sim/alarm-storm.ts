/**
 * An alarm storm for the load test and the benchmark: the OPC UA simulator with N
 * AlarmConditionType instances (`BulkAlarms.A<i>`) in a child process of its own, so the server's
 * work does not share the measuring process's core, toggling them round-robin at a given rate.
 * Every toggle is one condition event; every activation that ends is one range the gateway owes.
 *
 * The child reports each activation as [alarm index, became active, became inactive] by the
 * server's ActiveState/TransitionTime, so a test can check every range exactly.
 *
 * Never imported by the gateway's runtime path.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface StormResult {
  /** Condition events raised (activations + deactivations). */
  events: number;
  seconds: number;
  /** [alarm index (1-based), active since, inactive since] for every activation, all ended. */
  activations: Array<[number, number, number]>;
}

export interface AlarmStorm {
  endpointUrl: string;
  /** ConditionId (node id text) of alarm i is conditionIds[i - 1]. */
  conditionIds: string[];
  /** Raises `rate` events per second for `seconds`, then clears every alarm still active. */
  storm(rate: number, seconds: number): Promise<StormResult>;
  close(): Promise<void>;
}

type Message = { cmd: 'storm'; rate: number; seconds: number } | { cmd: 'stop' };

/** Child side: `node --import tsx src/sim/alarm-storm.ts <alarms>`. */
async function child(alarmCount: number): Promise<void> {
  const { startOpcuaSimulator } = await import('./opcua-server.js');
  const sim = await startOpcuaSimulator({ bulkAlarms: alarmCount, updateIntervalMs: 60_000 });
  sim.pauseUpdates();
  const alarms = Array.from({ length: alarmCount }, (_, i) => sim.bulkAlarm(i + 1));
  process.send!({ ready: true, endpointUrl: sim.endpointUrl, conditionIds: alarms.map((a) => a.conditionId) });
  process.on('message', (m: Message) => {
    if (m.cmd === 'stop') {
      void sim.close().finally(() => process.exit(0));
      return;
    }
    const since = new Array<number | null>(alarmCount).fill(null);
    const activations: Array<[number, number, number]> = [];
    let events = 0;
    let next = 0;
    const toggle = () => {
      const i = next;
      next = (next + 1) % alarmCount;
      const a = alarms[i];
      if (since[i] === null) {
        a.activate();
        since[i] = a.transitionTime();
      } else {
        a.deactivate({ retain: false });
        activations.push([i + 1, since[i]!, a.transitionTime()!]);
        since[i] = null;
      }
      events += 1;
    };
    const total = Math.round(m.rate * m.seconds);
    const t0 = performance.now();
    const timer = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - t0) * m.rate) / 1_000));
      // At most 20 ms of toggling per tick: on a starved machine a catch-up loop would hold the
      // server's event loop for seconds, it would publish nothing (not even keep-alives), and the
      // gateway's watchdog would rightly rebuild the connection, losing the ranges in between
      // (retain=false conditions that ended are not in a ConditionRefresh, Part 9 §5.5.7). The
      // storm then runs slower than asked; the test and the benchmark print the pace achieved.
      const budgetEnd = performance.now() + 20;
      while (events < due && performance.now() < budgetEnd) toggle();
      if (events < total) return;
      clearInterval(timer);
      for (let i = 0; i < alarmCount; i++) {
        if (since[i] === null) continue;
        alarms[i].deactivate({ retain: false });
        activations.push([i + 1, since[i]!, alarms[i].transitionTime()!]);
        since[i] = null;
        events += 1;
      }
      process.send!({ done: true, result: { events, seconds: (performance.now() - t0) / 1_000, activations } satisfies StormResult });
    }, 5);
  });
  process.on('disconnect', () => void sim.close().finally(() => process.exit(0)));
}

/** Parent side: starts the child and waits until its server listens. */
export function startAlarmStorm(alarmCount = 100): Promise<AlarmStorm> {
  const proc: ChildProcess = fork(fileURLToPath(import.meta.url), [String(alarmCount)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let err = '';
  proc.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`the alarm storm server did not start within 90 s:\n${err.slice(-2000)}`)), 90_000);
    const fail = (e: Error) => {
      clearTimeout(timer);
      proc.kill('SIGKILL');
      reject(e);
    };
    proc.once('exit', (code) => fail(new Error(`the alarm storm server exited (${code}):\n${err.slice(-2000)}`)));
    proc.once('message', (m: { endpointUrl: string; conditionIds: string[] }) => {
      clearTimeout(timer);
      proc.removeAllListeners('exit');
      resolve({
        endpointUrl: m.endpointUrl,
        conditionIds: m.conditionIds,
        storm: (rate, seconds) =>
          new Promise((res, rej) => {
            const onMessage = (r: { done?: boolean; result: StormResult }) => {
              if (!r.done) return;
              proc.off('message', onMessage);
              proc.off('exit', onExit);
              res(r.result);
            };
            const onExit = (code: number | null) => rej(new Error(`the alarm storm server exited (${code}) during the storm:\n${err.slice(-2000)}`));
            proc.on('message', onMessage);
            proc.once('exit', onExit);
            proc.send({ cmd: 'storm', rate, seconds } satisfies Message);
          }),
        close: () =>
          new Promise<void>((res) => {
            if (proc.exitCode !== null || proc.signalCode !== null) return res();
            const kill = setTimeout(() => proc.kill('SIGKILL'), 10_000);
            proc.once('exit', () => {
              clearTimeout(kill);
              res();
            });
            proc.send({ cmd: 'stop' } satisfies Message);
          }),
      });
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) {
  void child(Number(process.argv[2] ?? 100));
}
