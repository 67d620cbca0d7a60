/** A peer address, `host:port` or `[ipv6]:port`, as split by parsePeerAddress. */
export interface PeerAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * Splits `host:port` (`[::1]:7000` for IPv6). The host is what other nodes dial, so a wildcard
 * (0.0.0.0, ::) is refused; port 0 asks the system for a free port (the declared address then
 * names the port it gave).
 */
export function parsePeerAddress(text: string): PeerAddress {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (host === undefined || !(port >= 0 && port <= 65_535)) throw new Error(`"${text}" is not host:port (or [ipv6]:port)`);
  if (host === '0.0.0.0' || host === '::' || host === '*') throw new Error(`"${text}": other nodes dial this address, so it cannot be a wildcard`);
  return { host, port };
}

/** `host:port`, with brackets around an IPv6 host. */
export function formatPeerAddress({ host, port }: PeerAddress): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
