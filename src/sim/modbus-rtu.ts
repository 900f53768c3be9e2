import net from 'node:net';
import type { Duplex } from 'node:stream';
import { SerialPort } from 'serialport';
import { freePort } from './modbus-device.js';
import { SimulatedDevice, startDemoValues } from './modbus-model.js';

/**
 * A small Modbus RTU responder (Modbus over Serial Line v1.02 §2.5.1.1 framing: unit, PDU,
 * CRC-16 low byte first) for reads FC1-FC4, used to simulate RTU devices on a serial port (a socat
 * pty pair in the tests) and behind a TCP serial device server ("RTU over TCP"). It answers from a
 * `SimulatedDevice`, so faults and the request log work as for the TCP simulator.
 */

/** CRC-16/MODBUS (polynomial 0xA001 reflected, initial 0xFFFF), §6.2.2 of the serial line spec. */
export function crc16(bytes: Uint8Array): number {
  let crc = 0xffff;
  for (const b of bytes) {
    crc ^= b;
    for (let i = 0; i < 8; i++) crc = crc & 1 ? (crc >>> 1) ^ 0xa001 : crc >>> 1;
  }
  return crc;
}

function withCrc(body: Buffer): Buffer {
  const out = Buffer.alloc(body.length + 2);
  body.copy(out);
  out.writeUInt16LE(crc16(body), body.length);
  return out;
}

/**
 * Reads request frames from `stream` and writes answers. Requests for other unit ids are logged
 * and ignored (on a shared bus another device answers them). Returns a function that detaches.
 */
export function attachRtuResponder(stream: Duplex, device: SimulatedDevice, unitId: number): () => void {
  let pending = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    // Read requests FC1-FC4 are 8 bytes: unit, fc, address (2), quantity (2), CRC (2).
    while (pending.length >= 8) {
      const frame = pending.subarray(0, 8);
      if (crc16(frame.subarray(0, 6)) !== frame.readUInt16LE(6)) {
        pending = pending.subarray(1); // not a frame start: resynchronise byte by byte
        continue;
      }
      pending = pending.subarray(8);
      const unit = frame[0];
      const fc = frame[1];
      const address = frame.readUInt16BE(2);
      const quantity = frame.readUInt16BE(4);
      device.record({ unitId: unit, functionCode: fc, address, quantity });
      if (unitId !== 255 && unit !== unitId) continue;
      const answer = device.answer(unit, fc, address, quantity);
      if (answer.kind === 'silent') continue;
      const reply =
        answer.kind === 'exception'
          ? withCrc(Buffer.from([unit, fc | 0x80, answer.code]))
          : withCrc(Buffer.concat([Buffer.from([unit, fc, answer.bytes.length]), answer.bytes]));
      const send = () => {
        if (!stream.destroyed && stream.writable) stream.write(reply);
      };
      if (device.delayMs > 0) setTimeout(send, device.delayMs);
      else send();
    }
  };
  stream.on('data', onData);
  return () => stream.off('data', onData);
}

export interface RtuSimulator {
  readonly device: SimulatedDevice;
  /** TCP port (rtu_over_tcp only). */
  readonly port?: number;
  close(): Promise<void>;
}

export interface RtuSimulatorOptions {
  unitId?: number;
  device?: SimulatedDevice;
  demo?: boolean;
}

/** An RTU device on a serial port (for tests: one end of a socat pty pair). */
export async function startModbusRtuSerialSimulator(
  options: RtuSimulatorOptions & { path: string; baudRate?: number; parity?: 'none' | 'even' | 'odd'; dataBits?: 7 | 8; stopBits?: 1 | 2 },
): Promise<RtuSimulator> {
  const device = options.device ?? new SimulatedDevice();
  const port = new SerialPort({
    path: options.path,
    baudRate: options.baudRate ?? 19_200,
    parity: options.parity ?? 'even',
    dataBits: options.dataBits ?? 8,
    stopBits: options.stopBits ?? 1,
    autoOpen: false,
  });
  // An unplugged adapter (a killed socat) surfaces as 'error' and 'close'; a test peer stays quiet.
  port.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => port.open((err) => (err ? reject(err) : resolve())));
  const detach = attachRtuResponder(port, device, options.unitId ?? 1);
  const stopDemo = options.demo ? startDemoValues(device) : () => undefined;
  let closed: Promise<void> | null = null;
  return {
    device,
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        stopDemo();
        detach();
        if (!port.isOpen) return resolve();
        port.close(() => resolve());
      });
      return closed;
    },
  };
}

/** An RTU device behind a TCP serial device server: bare RTU frames over TCP, no MBAP header. */
export async function startModbusRtuOverTcpSimulator(options: RtuSimulatorOptions & { port?: number; host?: string } = {}): Promise<RtuSimulator> {
  const device = options.device ?? new SimulatedDevice();
  const host = options.host ?? '127.0.0.1';
  const sockets = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on('error', () => undefined);
    sock.on('close', () => sockets.delete(sock));
    attachRtuResponder(sock, device, options.unitId ?? 1);
  });
  const port = options.port === undefined || options.port === 0 ? await freePort(host) : options.port;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const stopDemo = options.demo ? startDemoValues(device) : () => undefined;
  let closed: Promise<void> | null = null;
  return {
    device,
    port,
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        stopDemo();
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      });
      return closed;
    },
  };
}
