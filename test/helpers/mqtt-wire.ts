import { connect, type Socket } from 'node:net';

/** An MQTT 3.1.1 CONNECT (§3.1) with client id, user name and password; keep-alive 60 s, clean session. */
export function connectPacket(clientId: string, username: string, password: string): Buffer {
  const str = (s: string) => {
    const b = Buffer.from(s, 'utf8');
    return Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b]);
  };
  const variable = Buffer.from([0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x04, 0xc2, 0x00, 0x3c]);
  const payload = Buffer.concat([str(clientId), str(username), str(password)]);
  const body = Buffer.concat([variable, payload]);
  if (body.length > 127) throw new Error('connectPacket: keep the names short (one length byte)');
  return Buffer.concat([Buffer.from([0x10, body.length]), body]);
}

export interface PlcOptions {
  port: number;
  host?: string;
  localAddress?: string;
  clientId: string;
  username: string;
  password: string;
  /**
   * Resolves when the PLC should send its CONNECT (it has connected and waits, as slow PLCs do);
   * `gone()` turns true when the broker closed the connection meanwhile (stop waiting then).
   */
  before?: (gone: () => boolean) => Promise<void>;
  /** How long to wait for the CONNACK after sending CONNECT. */
  timeoutMs?: number;
}

/**
 * A PLC connecting over raw TCP: connects, waits for `before`, sends CONNECT and reads the
 * CONNACK. Resolves with its return code (0: accepted, MQTT 3.1.1 §3.2.2.3), or 'closed' when the
 * broker closed or reset the connection first, or 'timeout'.
 */
export function plcConnect(o: PlcOptions): Promise<number | 'closed' | 'timeout'> {
  return plcSession(o).then((r) => {
    r.socket.destroy();
    return r.code;
  });
}

/** As plcConnect, but the connection stays open (an authenticated client holding its slot) until destroyed. */
export function plcSession(o: PlcOptions): Promise<{ code: number | 'closed' | 'timeout'; socket: Socket }> {
  return new Promise((resolve) => {
    const s = connect({ port: o.port, host: o.host ?? '127.0.0.1', localAddress: o.localAddress });
    let done = false;
    let timer: NodeJS.Timeout | null = null;
    const finish = (r: number | 'closed' | 'timeout') => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      if (r !== 0) s.destroy();
      resolve({ code: r, socket: s });
    };
    let got = Buffer.alloc(0);
    s.on('data', (d) => {
      got = Buffer.concat([got, d]);
      // CONNACK: 0x20, remaining length 2, flags, return code.
      if (got.length >= 4 && got[0] === 0x20) finish(got[3]);
    });
    s.on('error', () => finish('closed'));
    s.on('close', () => finish('closed'));
    s.on('connect', () => {
      (o.before ?? (async () => undefined))(() => done).then(
        () => {
          if (done) return;
          s.write(connectPacket(o.clientId, o.username, o.password));
          timer = setTimeout(() => finish('timeout'), o.timeoutMs ?? 15_000);
        },
        () => finish('timeout'),
      );
    });
  });
}
