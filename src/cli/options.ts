import { isIP } from 'node:net';
import { InvalidArgumentError } from 'commander';
import { parseAdvertised, type Advertised } from '../cluster/peer/PeerAddress.js';

/** Parsers for command-line values; each throws InvalidArgumentError with a one-line reason. */

export function integerIn(min: number, max: number): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (!/^-?\d+$/.test(value.trim())) throw new InvalidArgumentError(`"${value}" is not a whole number from ${min} to ${max}.`);
    if (parsed < min || parsed > max) throw new InvalidArgumentError(`${value.trim()} is not between ${min} and ${max}.`);
    return parsed;
  };
}

export const parsePort = integerIn(0, 65535);

const BYTE_SUFFIXES: Readonly<Record<string, number>> = { '': 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 };

/**
 * A size in bytes from `min` to `max`: a whole number, optionally followed by K, M, G or T (also
 * KiB, MiB, GiB, TiB; any case), each a power of 1024: `1G` and `1GiB` are 1,073,741,824.
 */
export function byteSizeIn(min: number, max: number): (value: string) => number {
  return (value) => {
    const match = /^(\d+)\s*([kmgt]?)(i?b)?$/i.exec(value.trim());
    if (match === null || (match[3] !== undefined && match[2] === '')) {
      throw new InvalidArgumentError(`"${value}" is not a size in bytes (a whole number, optionally with K, M, G or T: 512M, 1G).`);
    }
    const bytes = Number(match[1]) * BYTE_SUFFIXES[match[2]!.toLowerCase()]!;
    if (bytes < min || bytes > max) throw new InvalidArgumentError(`${value.trim()} (${bytes} bytes) is not between ${min} and ${max} bytes.`);
    return bytes;
  };
}

/** The longest --lock-delay: an hour (Chubby's and Consul's are up to a minute). */
export const MAX_LOCK_DELAY_SECONDS = 3600;

/** `--lock-delay`: seconds, whole or to the millisecond (0.25), from 0 to MAX_LOCK_DELAY_SECONDS. */
export function parseLockDelay(value: string): number {
  if (!/^\d+(\.\d{1,3})?$/.test(value.trim())) throw new InvalidArgumentError(`"${value}" is not a number of seconds (at most three decimals).`);
  const seconds = Number(value);
  if (seconds > MAX_LOCK_DELAY_SECONDS) throw new InvalidArgumentError(`${value.trim()} is more than ${MAX_LOCK_DELAY_SECONDS} seconds.`);
  return seconds;
}

export function parseListenAddress(value: string): string {
  if (isIP(value) !== 0 || /^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/.test(value)) return value;
  throw new InvalidArgumentError(`"${value}" is not an IP address or host name.`);
}

export function parseFileName(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('an empty file name.');
  return value;
}

/** `--etcd`: comma-separated http(s) URLs. */
export function parseEndpoints(value: string): string[] {
  const urls = value
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
  if (urls.length === 0) throw new InvalidArgumentError('no etcd endpoint given.');
  for (const url of urls) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new InvalidArgumentError(`"${url}" is not a URL (e.g. http://127.0.0.1:2379).`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new InvalidArgumentError(`"${url}" is not an http:// or https:// URL.`);
    }
  }
  return urls;
}

/** `--cluster`: becomes an etcd key prefix, so a plain word. */
export function parseClusterName(value: string): string {
  if (/^[A-Za-z0-9_.-]{1,64}$/.test(value)) return value;
  throw new InvalidArgumentError(`"${value}" is not a cluster name (1-64 of A-Z a-z 0-9 _ . -).`);
}

/** `--name`: a node name, carried in every batch the node appends (at most 255 bytes). */
export function parseNodeName(value: string): string {
  if (/^[A-Za-z0-9_.:@[\]-]{1,128}$/.test(value)) return value;
  throw new InvalidArgumentError(`"${value}" is not a node name (1-128 of A-Z a-z 0-9 _ . : @ [ ] -).`);
}

/** `--candidate-priority`: 1-15, smaller preferred, or off (never leads). */
export function parseCandidatePriority(value: string): number | 'off' {
  if (value === 'off') return 'off';
  return integerIn(1, 15)(value);
}

/** `--advertise host[:port]`: see parseAdvertised. */
export function parseAdvertise(value: string): Advertised {
  try {
    return parseAdvertised(value);
  } catch (error) {
    throw new InvalidArgumentError(`${(error as Error).message}.`);
  }
}
