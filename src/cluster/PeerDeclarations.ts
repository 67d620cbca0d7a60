import type { Timers } from '../runtime/Timers.js';

/** What the nodes declare about themselves, read at one revision (EtcdLog.peerView). */
export interface PeerView {
  /** Live node name → the address its lock port takes links on (host:port). */
  readonly peers: ReadonlyMap<string, string>;
  /** Whether every live node declares it reads bundles (log value format 2), and bundles may be written. */
  readonly readsBundles: boolean;
  /** The cluster's peer secret (peer/PeerAuth); the in-memory links of the simulation need none. */
  readonly secret?: Uint8Array;
}

export interface PeerDirectory {
  peerView(timeoutMs: number): Promise<PeerView>;
}

/**
 * How often the declarations are read again: a restarted node's new address, or a node that does
 * not read bundles, is seen within this (plus one call).
 */
export const PEER_VIEW_EVERY_MS = 1_000;
/** Longest one read of the declarations may take. */
const PEER_VIEW_TIMEOUT_MS = 2_000;

/**
 * The other nodes' declarations as this node last read them, once every PEER_VIEW_EVERY_MS: where
 * each live node's lock port takes links (AppendRouter), whether every one reads bundles (the
 * sequencer's gate), and the cluster's peer secret (both ends of a link). A read that fails keeps
 * the last view: a stale one costs speed only (every batch keeps its own node's writer lease), and
 * the formats it gates go stale with it, as between two reads.
 */
export class PeerDeclarations {
  private view: PeerView | undefined;
  private stop: (() => void) | undefined;
  private reading = false;

  constructor(
    private readonly directory: PeerDirectory,
    private readonly timers: Timers,
  ) {}

  /** Reads the declarations now and every PEER_VIEW_EVERY_MS until close. */
  start(): void {
    this.stop = this.timers.every(PEER_VIEW_EVERY_MS, () => void this.refresh());
    void this.refresh();
  }

  close(): void {
    this.stop?.();
    this.stop = undefined;
  }

  /** Whether the declarations were read at least once. */
  get known(): boolean {
    return this.view !== undefined;
  }

  /** Where `node` declared its lock port, if it did. */
  addressOf(node: string): string | undefined {
    return this.view?.peers.get(node);
  }

  /** The cluster's peer secret, once read. */
  get secret(): Uint8Array | undefined {
    return this.view?.secret;
  }

  /** Whether every live node reads bundles, as last read (false until read): the sequencer's bundling gate. */
  get readsBundles(): boolean {
    return this.view?.readsBundles ?? false;
  }

  private async refresh(): Promise<void> {
    if (this.reading || this.stop === undefined) return;
    this.reading = true;
    try {
      this.view = await this.directory.peerView(PEER_VIEW_TIMEOUT_MS);
    } catch {
      // etcd unreachable: keep the last view (see the class comment).
    } finally {
      this.reading = false;
    }
  }
}
