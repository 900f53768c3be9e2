import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { Aedes } from 'aedes';

export interface RecordingBroker {
  url: string;
  /** Passwords presented in CONNECT packets, in order. */
  passwords: string[];
  close(): Promise<void>;
}

/** An in-process aedes broker on 127.0.0.1 that accepts every client and records the passwords they present: "any host" a secret could be sent to. */
export async function startRecordingBroker(): Promise<RecordingBroker> {
  const aedes = await Aedes.createBroker();
  const passwords: string[] = [];
  aedes.authenticate = (_client, _username, password, done) => {
    passwords.push(password ? Buffer.from(password).toString() : '');
    done(null, true);
  };
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    aedes.handle(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `mqtt://127.0.0.1:${(server.address() as AddressInfo).port}`,
    passwords,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => aedes.close(() => r()));
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
