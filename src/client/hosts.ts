/**
 * The nodes a client may talk to: `hosts: ['a:7734', 'b', '[::1]:7735', { host: 'c', port: 7736 }]`,
 * or the single `host`/`port` of old. Parsed and checked before anything is connected.
 */

/** One node, as `{ host, port }` (port: the client's `port` option, or 7734, when left out). */
export interface HostAndPort {
  readonly host: string;
  readonly port?: number;
}

/**
 * In which order the hosts are tried. 'random-start' (default): from a random one, then on
 * through the list in its order, wrapping around; 'as-listed': always from the first.
 */
export type HostOrder = 'random-start' | 'as-listed';

export const HOST_ORDERS: readonly HostOrder[] = ['random-start', 'as-listed'];

/** A checked node address. */
export interface Endpoint {
  readonly host: string;
  readonly port: number;
  /** host:port, [v6]:port, for messages. */
  readonly address: string;
}

export function describeAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

function checkPort(port: number, entry: string): number {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new RangeError(`bad port in host "${entry}": a port is an integer from 1 to 65535`);
  }
  return port;
}

function endpoint(host: string, port: number, entry: string): Endpoint {
  if (host === '') throw new RangeError(`no host name in "${entry}"`);
  checkPort(port, entry);
  return { host, port, address: describeAddress(host, port) };
}

/**
 * `host`, `host:port`, `[v6]`, `[v6]:port`, or a bare IPv6 address (two colons or more: no port).
 * A missing port is `defaultPort`.
 */
export function parseHost(entry: string, defaultPort: number): Endpoint {
  const text = entry.trim();
  const bracketed = /^\[([^\]]*)\](?::(.*))?$/.exec(text);
  if (bracketed !== null) {
    return endpoint(bracketed[1]!, bracketed[2] === undefined ? defaultPort : portOf(bracketed[2], entry), entry);
  }
  const colons = text.split(':').length - 1;
  if (colons !== 1) return endpoint(text, defaultPort, entry);
  const [host, port] = text.split(':') as [string, string];
  return endpoint(host, portOf(port, entry), entry);
}

function portOf(text: string, entry: string): number {
  if (!/^\d{1,5}$/.test(text)) throw new RangeError(`bad port in host "${entry}": a port is an integer from 1 to 65535`);
  return checkPort(Number(text), entry);
}

/** A comma-separated list, as lockctl's --host and LOCKCTL_HOST take it. */
export function parseHostList(list: string, defaultPort: number): Endpoint[] {
  const entries = list.split(',');
  if (entries.some((e) => e.trim() === '')) throw new RangeError(`empty entry in the host list "${list}"`);
  return entries.map((e) => parseHost(e, defaultPort));
}

export interface HostOptions {
  readonly host?: string;
  readonly port?: number;
  readonly hosts?: ReadonlyArray<string | HostAndPort>;
}

/** The endpoints of connect options: `hosts` when given (not with `host`), else the one host/port. */
export function endpointsOf(options: HostOptions, defaultHost: string, defaultPort: number): Endpoint[] {
  const port = options.port ?? defaultPort;
  if (options.hosts === undefined) {
    const host = options.host ?? defaultHost;
    return [{ host, port, address: describeAddress(host, port) }];
  }
  if (options.host !== undefined) throw new RangeError('give either host or hosts, not both');
  if (options.hosts.length === 0) throw new RangeError('hosts is empty');
  return options.hosts.map((entry) =>
    typeof entry === 'string' ? parseHost(entry, port) : endpoint(entry.host, entry.port ?? port, describeAddress(entry.host, entry.port ?? port)),
  );
}
