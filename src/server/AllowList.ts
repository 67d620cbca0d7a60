import { isIPv4, isIPv6 } from 'node:net';
import IPCIDR from 'ip-cidr';
import { Address4, Address6 } from 'ip-address';
import { FileFormatError, meaningfulLines } from '../files/FileFormatError.js';

const IPV4_MAPPED = new Address6('::ffff:0:0/96');
const IPV4_BITS = 32;
const IPV6_BITS = 128;
const MAPPED_PREFIX_BITS = IPV6_BITS - IPV4_BITS;

/** A peer or hosts-file address reduced to one family and one spelling. */
export interface NormalizedAddress {
  readonly family: 4 | 6;
  /** Dotted quad for IPv4; canonical hex (no embedded dotted quad) for IPv6. */
  readonly address: string;
}

/**
 * Normalises an address so that only IPv4-mapped IPv6 (::ffff:a.b.c.d or ::ffff:7f00:1) counts
 * as IPv4. ip-cidr would also treat any IPv6 literal holding a dotted quad (::10.1.2.3,
 * 64:ff9b::10.1.2.3) as IPv4, and would not see ::ffff:7f00:1 as IPv4 at all, so every address
 * goes through here before it meets ip-cidr, always in a form without a dotted quad.
 */
export function normalizeAddress(text: string): NormalizedAddress | undefined {
  if (isIPv4(text)) return { family: 4, address: new Address4(text).correctForm() };
  const zoneless = text.replace(/%.*$/, '');
  if (!isIPv6(zoneless)) return undefined;
  const address = new Address6(zoneless);
  if (address.isInSubnet(IPV4_MAPPED)) return { family: 4, address: address.to4().correctForm() };
  return { family: 6, address: address.correctForm() };
}

interface Range {
  readonly family: 4 | 6;
  readonly cidr: IPCIDR;
  /** The network (10.0.0.0/8) when the address as written has bits set beyond the prefix
   *  (10.0.0.1/8): likely a mistake; undefined otherwise. */
  readonly widenedTo: string | undefined;
}

/** Something in a hosts file that is accepted but probably not what was meant. */
export interface HostsWarning {
  /** 1-based line; undefined for the file as a whole. */
  readonly line: number | undefined;
  readonly reason: string;
}

/** Parses one hosts-file entry: an IPv4 or IPv6 address, or a CIDR range of either. */
function parseEntry(entry: string): Range | undefined {
  const slash = entry.indexOf('/');
  const addressPart = slash === -1 ? entry : entry.slice(0, slash);
  const prefixPart = slash === -1 ? undefined : entry.slice(slash + 1);
  const normalized = normalizeAddress(addressPart);
  if (normalized === undefined || addressPart.includes('%')) return undefined;
  const written6 = isIPv6(addressPart);
  const maxBits = written6 ? IPV6_BITS : IPV4_BITS;
  let prefix = maxBits;
  if (prefixPart !== undefined) {
    if (!/^\d{1,3}$/.test(prefixPart)) return undefined;
    prefix = Number(prefixPart);
    if (prefix > maxBits) return undefined;
  }
  if (written6 && normalized.family === 4) {
    // An IPv4-mapped range (::ffff:10.0.0.0/104) is the IPv4 range 10.0.0.0/8.
    if (prefix < MAPPED_PREFIX_BITS) return undefined;
    prefix -= MAPPED_PREFIX_BITS;
  }
  const cidr = `${normalized.address}/${prefix}`;
  if (!IPCIDR.isValidCIDR(cidr)) return undefined;
  const network = normalized.family === 4 ? new Address4(cidr).startAddress() : new Address6(cidr).startAddress();
  const widenedTo = network.correctForm() === normalized.address ? undefined : `${network.correctForm()}/${prefix}`;
  return { family: normalized.family, cidr: new IPCIDR(cidr), widenedTo };
}

/** The hosts allowlist: which peer addresses may connect. */
export class AllowList {
  private constructor(
    private readonly ranges: readonly Range[],
    /** Accepted lines that are probably mistakes, and an empty file (which refuses everyone). */
    readonly warnings: readonly HostsWarning[],
  ) {}

  /** Parses hosts-file text; a bad line is a FileFormatError naming `file` and the line. */
  static parse(text: string, file: string): AllowList {
    const ranges: Range[] = [];
    const warnings: HostsWarning[] = [];
    for (const { line, text: content } of meaningfulLines(text)) {
      const range = parseEntry(content);
      if (range === undefined) {
        throw new FileFormatError(file, line, `"${content}" is not an IPv4 or IPv6 address or CIDR range`);
      }
      if (range.widenedTo !== undefined) {
        warnings.push({ line, reason: `"${content}" has host bits set; it allows the whole range ${range.widenedTo}` });
      }
      ranges.push(range);
    }
    if (ranges.length === 0) warnings.push({ line: undefined, reason: 'no entries: every connection will be refused' });
    return new AllowList(ranges, warnings);
  }

  get size(): number {
    return this.ranges.length;
  }

  /** Whether a peer (as socket.remoteAddress reports it) may connect. */
  allows(peer: string | undefined): boolean {
    if (peer === undefined) return false;
    const normalized = normalizeAddress(peer);
    if (normalized === undefined) return false;
    for (const range of this.ranges) {
      if (range.family === normalized.family && range.cidr.contains(normalized.address)) return true;
    }
    return false;
  }
}
