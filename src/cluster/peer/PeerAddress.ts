import { connect } from 'node:net';

/** Where other nodes reach this node's lock port: `host:port` or `[ipv6]:port`. */
export interface PeerAddress {
  readonly host: string;
  readonly port: number;
}

/** `--advertise`: a host, with or without a port (without one, the lock port's). */
export interface Advertised {
  readonly host: string;
  readonly port: number | undefined;
}

const WILDCARDS = new Set(['0.0.0.0', '::', '*', '']);

/**
 * Splits `host`, `host:port`, `[ipv6]` or `[ipv6]:port` (`--advertise`). The host is what other
 * nodes dial, so a wildcard (0.0.0.0, ::) is refused.
 */
export function parseAdvertised(text: string): Advertised {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(text);
  const host = match?.[1] ?? match?.[2];
  const port = match?.[3] === undefined ? undefined : Number(match[3]);
  if (host === undefined || (port !== undefined && !(port >= 1 && port <= 65_535))) {
    throw new Error(`"${text}" is not a host, host:port, [ipv6] or [ipv6]:port`);
  }
  if (WILDCARDS.has(host)) throw new Error(`"${text}": other nodes dial this address, so it cannot be a wildcard`);
  return { host, port };
}

/** Splits `host:port` (`[::1]:7000` for IPv6), as declared in etcd; a wildcard host is refused. */
export function parsePeerAddress(text: string): PeerAddress {
  const parsed = parseAdvertised(text);
  if (parsed.port === undefined) throw new Error(`"${text}" is not host:port (or [ipv6]:port)`);
  return { host: parsed.host, port: parsed.port };
}

/** `host:port`, with brackets around an IPv6 host. */
export function formatPeerAddress({ host, port }: PeerAddress): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * The address this machine reaches etcd from: the local end of a TCP connection to the first of
 * `endpoints` (URLs) that accepts one within `timeoutMs`. Other nodes reach etcd too, so they can
 * most likely reach this address; a node on an odd network says otherwise with `--advertise`.
 */
export async function addressTowards(endpoints: readonly string[], timeoutMs: number): Promise<string> {
  const failures: string[] = [];
  for (const endpoint of endpoints) {
    const url = new URL(endpoint);
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    try {
      return await localAddressTo(host, port, timeoutMs);
    } catch (error) {
      failures.push(`${endpoint}: ${(error as Error).message}`);
    }
  }
  throw new Error(`no etcd endpoint to learn this node's address from (${failures.join('; ')}); give it with --advertise`);
}

function localAddressTo(host: string, port: number, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no connection within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      const address = socket.localAddress;
      socket.destroy();
      if (address === undefined) reject(new Error('the connection has no local address'));
      else resolve(address.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1'));
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}
