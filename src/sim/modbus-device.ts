import modbusSerial from 'modbus-serial';
import net from 'node:net';
import { pathToFileURL } from 'node:url';
import { SimulatedDevice, startDemoValues, type SimFault, type SimOrder, type SimRequest, type SimTable, type SimType } from './modbus-model.js';

export {
  KNOWN_COILS,
  KNOWN_DISCRETE_INPUTS,
  KNOWN_VALUES_BASE,
  MODBUS_DEMO_MAP,
  SPECIAL_ADDRESSES,
  SimulatedDevice,
  encodeRegisters,
  knownValues,
  type KnownValue,
  type SimFault,
  type SimRequest,
} from './modbus-model.js';

/** Port the demo simulator listens on when none is given (502 needs root on Linux). */
export const MODBUS_SIM_DEFAULT_PORT = 5020;

export interface ModbusSimulatorOptions {
  /** TCP port; 0 picks a free one. Default 5020. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Unit id answered; 255 answers every unit id. Default 1. */
  unitId?: number;
  /** Values, faults and request log; pass the one of a closed simulator to "restart" it. */
  device?: SimulatedDevice;
  /** Move the demo mixer values (see MODBUS_DEMO_MAP). Default true. */
  demo?: boolean;
  demoIntervalMs?: number;
}

export interface ModbusSimulator {
  readonly port: number;
  readonly host: string;
  readonly unitId: number;
  readonly device: SimulatedDevice;
  /** Requests received (every function code, every unit id), optionally filtered. */
  requestCount(filter?: Partial<SimRequest>): number;
  requests(): SimRequest[];
  resetRequestCount(): void;
  setRegister(table: 'holding' | 'input', address: number, value: number): void;
  setValue(table: 'holding' | 'input', address: number, value: number | bigint, type: SimType, order?: SimOrder): void;
  setBits(table: 'coil' | 'discrete_input', address: number, bits: ReadonlyArray<boolean | number>): void;
  /** Answer reads touching `from`..`to` with exception `code` (Modbus Application Protocol §7). */
  injectException(from: number, to: number, code: number, table?: SimTable): void;
  /** Do not answer reads touching `from`..`to` (a timeout for the client). */
  injectSilence(from: number, to: number, table?: SimTable): void;
  injectFault(fault: SimFault): void;
  /** Delay every answer by `ms`. */
  setDelay(ms: number): void;
  clearFaults(): void;
  /** Resets every open client connection (a network blip) while the server keeps listening. */
  dropConnections(): void;
  connectionCount(): number;
  close(): Promise<void>;
}

type Callback<T> = (err: unknown, value?: T) => void;

/**
 * A Modbus TCP device for the demo and the tests: modbus-serial's ServerTCP serving a
 * `SimulatedDevice` (known values of every type and byte order from address 1000, the demo mixer
 * from address 0; see modbus-model.ts), with fault injection and a request counter.
 */
export async function startModbusSimulator(options: ModbusSimulatorOptions = {}): Promise<ModbusSimulator> {
  const host = options.host ?? '127.0.0.1';
  const unitId = options.unitId ?? 1;
  const device = options.device ?? new SimulatedDevice();
  const stopDemo = options.demo === false ? () => undefined : startDemoValues(device, options.demoIntervalMs);
  const vector = makeVector(device);

  let server: InstanceType<typeof modbusSerial.ServerTCP> | undefined;
  let port = options.port ?? MODBUS_SIM_DEFAULT_PORT;
  // ServerTCP treats port 0 as "use 502", so a free port is found first; another process may
  // take it in between, hence the retries.
  for (let attempt = 0; ; attempt++) {
    const tryPort = port === 0 ? await freePort(host) : port;
    try {
      server = await listen(vector, host, tryPort, unitId);
      port = tryPort;
      break;
    } catch (err) {
      if (options.port !== 0 || attempt >= 5) {
        stopDemo();
        throw err;
      }
    }
  }
  const srv = server!;
  const sockets = new Set<net.Socket>();
  // Count requests on the wire: ServerTCP calls the vector once per register read but once per
  // bit for coils, so its callbacks cannot count requests. It keeps its net.Server in `_server`.
  const netServer = (srv as unknown as { _server: net.Server })._server;
  netServer.on('connection', (sock: net.Socket) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    let pending = Buffer.alloc(0);
    sock.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      // MBAP header (Modbus Messaging on TCP/IP v1.0b §3.1.3): transaction, protocol, length, unit.
      while (pending.length >= 8) {
        const length = pending.readUInt16BE(4);
        if (pending.length < 6 + length) break;
        const pdu = pending.subarray(6, 6 + length);
        if (pdu.length >= 6) device.record({ unitId: pdu[0], functionCode: pdu[1], address: pdu.readUInt16BE(2), quantity: pdu.readUInt16BE(4) });
        else if (pdu.length >= 2) device.record({ unitId: pdu[0], functionCode: pdu[1], address: 0, quantity: 0 });
        pending = pending.subarray(6 + length);
      }
    });
  });

  let closed: Promise<void> | null = null;
  return {
    port,
    host,
    unitId,
    device,
    requestCount: (filter) => device.requestCount(filter),
    requests: () => device.requests(),
    resetRequestCount: () => device.resetRequests(),
    setRegister: (table, address, value) => device.setRegisters(table, address, [value]),
    setValue: (table, address, value, type, order) => device.setValue(table, address, value, type, order),
    setBits: (table, address, bits) => device.setBits(table, address, bits),
    injectException: (from, to, code, table) => device.injectFault({ from, to, exception: code, table }),
    injectSilence: (from, to, table) => device.injectFault({ from, to, silent: true, table }),
    injectFault: (fault) => device.injectFault(fault),
    setDelay: (ms) => {
      device.delayMs = ms;
    },
    clearFaults: () => device.clearFaults(),
    dropConnections: () => {
      for (const s of sockets) s.resetAndDestroy();
    },
    connectionCount: () => sockets.size,
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        stopDemo();
        for (const s of sockets) s.destroy();
        srv.close(() => resolve());
      });
      return closed;
    },
  };
}

function listen(vector: object, host: string, port: number, unitID: number): Promise<InstanceType<typeof modbusSerial.ServerTCP>> {
  return new Promise((resolve, reject) => {
    const server = new modbusSerial.ServerTCP(vector as never, { host, port, unitID });
    const onError = (err: Error | null) => {
      server.close(() => undefined);
      reject(err ?? new Error('modbus simulator could not listen'));
    };
    server.once('serverError', onError);
    server.once('initialized', () => {
      server.removeListener('serverError', onError);
      // Later socket errors (a client resetting) are normal for a test peer.
      server.on('serverError', () => undefined);
      server.on('socketError', () => undefined);
      server.on('error', () => undefined);
      resolve(server);
    });
  });
}

export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * ServerTCP's service vector, in its callback forms so that answers can be delayed or withheld.
 * Register reads arrive once per request (getMultiple* for more than one register); coils and
 * discrete inputs arrive once per bit, each answered from the same model.
 */
function makeVector(device: SimulatedDevice): object {
  const respond = <T>(cb: Callback<T>, run: () => { value?: T; exception?: number; silent?: boolean }) => {
    const go = () => {
      const r = run();
      if (r.silent) return;
      if (r.exception !== undefined) cb({ modbusErrorCode: r.exception, msg: 'simulated exception' });
      else cb(null, r.value);
    };
    if (device.delayMs > 0) setTimeout(go, device.delayMs);
    else go();
  };
  const registers = (fc: 3 | 4, addr: number, length: number, unitID: number) => {
    const a = device.answer(unitID, fc, addr, length);
    if (a.kind === 'silent') return { silent: true };
    if (a.kind === 'exception') return { exception: a.code };
    const words: number[] = [];
    for (let i = 0; i < length; i++) words.push(a.bytes.readUInt16BE(i * 2));
    return { value: words };
  };
  const bit = (fc: 1 | 2, addr: number, unitID: number) => {
    const a = device.answer(unitID, fc, addr, 1);
    if (a.kind === 'silent') return { silent: true };
    if (a.kind === 'exception') return { exception: a.code };
    return { value: (a.bytes[0] & 1) === 1 };
  };
  return {
    getMultipleHoldingRegisters(addr: number, length: number, unitID: number, cb: Callback<number[]>) {
      respond(cb, () => registers(3, addr, length, unitID));
    },
    getHoldingRegister(addr: number, unitID: number, cb: Callback<number>) {
      respond(cb, () => {
        const r = registers(3, addr, 1, unitID);
        return { ...r, value: r.value?.[0] };
      });
    },
    getMultipleInputRegisters(addr: number, length: number, unitID: number, cb: Callback<number[]>) {
      respond(cb, () => registers(4, addr, length, unitID));
    },
    getInputRegister(addr: number, unitID: number, cb: Callback<number>) {
      respond(cb, () => {
        const r = registers(4, addr, 1, unitID);
        return { ...r, value: r.value?.[0] };
      });
    },
    getCoil(addr: number, unitID: number, cb: Callback<boolean>) {
      respond(cb, () => bit(1, addr, unitID));
    },
    getDiscreteInput(addr: number, unitID: number, cb: Callback<boolean>) {
      respond(cb, () => bit(2, addr, unitID));
    },
    setRegister(addr: number, value: number) {
      device.setRegisters('holding', addr, [value]);
    },
    setCoil(addr: number, value: boolean) {
      device.setBits('coil', addr, [value]);
    },
  };
}

/** `npx tsx src/sim/modbus-device.ts [PORT]`: run the simulated mixer alone (to try modbus-probe). */
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const port = process.argv[2] === undefined ? MODBUS_SIM_DEFAULT_PORT : Number(process.argv[2]);
  startModbusSimulator({ port, unitId: 255 }).then(
    (sim) => {
      process.stdout.write(`Modbus simulator on tcp://${sim.host}:${sim.port} (any unit id). Ctrl-C stops it.\n`);
      process.stdout.write(`Try: edge-gateway modbus-probe --device tcp://${sim.host}:${sim.port} --address 0 --count 7\n`);
      const stop = () => void sim.close().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    },
    (err: unknown) => {
      process.stderr.write(`modbus simulator: ${String(err)}\n`);
      process.exit(1);
    },
  );
}
