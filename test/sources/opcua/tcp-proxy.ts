import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP relay between the gateway and the OPC UA server on 127.0.0.1, to damage the network the
 * way a plant network fails: `cut()` drops every connection and refuses new ones (cable pulled,
 * switch rebooting), `blackhole()` keeps the sockets open but lets nothing through (a firewall
 * dropping packets, a half-open connection), `restore()` heals it.
 */
export interface TcpProxy {
  port: number;
  url(path: string): string;
  cut(): void;
  blackhole(): void;
  restore(): void;
  connections(): number;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let mode: 'open' | 'cut' | 'blackhole' = 'open';
  const pairs = new Set<{ a: Socket; b: Socket }>();
  const server: Server = createServer((a) => {
    if (mode !== 'open') {
      a.destroy();
      return;
    }
    const b = createConnection({ host: '127.0.0.1', port: targetPort });
    const pair = { a, b };
    pairs.add(pair);
    const forward = (from: Socket, to: Socket) =>
      from.on('data', (chunk) => {
        if (mode === 'open') to.write(chunk);
      });
    forward(a, b);
    forward(b, a);
    const end = () => {
      a.destroy();
      b.destroy();
      pairs.delete(pair);
    };
    a.on('close', end).on('error', end);
    b.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    port,
    url: (path) => `opc.tcp://127.0.0.1:${port}${path}`,
    cut() {
      mode = 'cut';
      for (const p of pairs) {
        p.a.destroy();
        p.b.destroy();
      }
      pairs.clear();
    },
    blackhole() {
      mode = 'blackhole';
    },
    restore() {
      mode = 'open';
    },
    connections: () => pairs.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const p of pairs) {
          p.a.destroy();
          p.b.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
