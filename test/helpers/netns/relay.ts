import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A TCP relay in user space that forwards each chunk, both ways, `delayMs` after it arrived, in
 * order: the delayed link this kernel cannot make (no sch_netem). A node's etcd endpoint points
 * at a relay, the relay at the member. The delay can change at any time; it applies to chunks
 * that arrive afterwards (a chunk never overtakes an earlier one).
 */
export class DelayRelay {
  delayMs = 0;
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly host: string,
    readonly port: number,
  ) {}

  static async start(listenHost: string, target: { host: string; port: number }): Promise<DelayRelay> {
    let relay: DelayRelay | undefined;
    const server = createServer({ noDelay: true }, (inbound) => relay?.accept(inbound, target));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, listenHost, () => resolve());
    });
    relay = new DelayRelay(server, listenHost, (server.address() as AddressInfo).port);
    return relay;
  }

  /** Connections being relayed now (each counts once, not its two sockets). */
  get connections(): number {
    return this.sockets.size / 2;
  }

  get url(): string {
    return `http://${this.host}:${this.port}`;
  }

  private accept(inbound: Socket, target: { host: string; port: number }): void {
    const outbound = connect({ host: target.host, port: target.port, noDelay: true });
    for (const socket of [inbound, outbound]) {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      // Either side failing ends both, as a real link's endpoints would see a reset.
      socket.on('error', () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
    this.pipe(inbound, outbound);
    this.pipe(outbound, inbound);
  }

  /** Forwards `from` → `to`, each chunk delayMs after it arrived; `from`'s end ends `to` after the rest. */
  private pipe(from: Socket, to: Socket): void {
    const queue: Array<{ at: number; data: Buffer | null }> = [];
    let timer: NodeJS.Timeout | undefined;
    const flush = (): void => {
      timer = undefined;
      const now = Date.now();
      while (queue.length > 0 && queue[0]!.at <= now) {
        const { data } = queue.shift()!;
        if (to.destroyed) return;
        if (data === null) to.end();
        else to.write(data);
      }
      if (queue.length > 0) timer = setTimeout(flush, queue[0]!.at - now);
    };
    const push = (data: Buffer | null): void => {
      const last = queue.at(-1)?.at ?? 0;
      queue.push({ at: Math.max(last, Date.now() + this.delayMs), data });
      if (this.delayMs === 0 && timer === undefined && queue.length === 1) flush();
      else if (timer === undefined) timer = setTimeout(flush, Math.max(0, queue[0]!.at - Date.now()));
    };
    from.on('data', (chunk: Buffer) => push(chunk));
    from.once('end', () => push(null));
    from.once('close', () => {
      if (timer !== undefined && queue.length === 0) clearTimeout(timer);
    });
  }

  /** Stops listening and drops every relayed connection. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
