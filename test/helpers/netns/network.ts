import type { LinkEnd } from './blackhole.js';
import { destroyNamespace, onProcessExit, sweepLeftovers } from './cleanup.js';
import { ip, run } from './ip.js';
import { newLabPrefix } from './names.js';

/** A namespace on the lab's networks: its addresses and the two ends of each of its links. */
export interface Host {
  readonly name: string;
  readonly ns: string;
  /** On the client network (nodes only): where the test's clients reach it. */
  readonly clientAddress?: string;
  readonly clientLink?: readonly LinkEnd[];
  /** On the backend network (nodes and etcd members). */
  readonly backendAddress: string;
  readonly backendLink: readonly LinkEnd[];
}

const subnetsInUse = new Set<number>();

/** Two free /24s of 169.254.0.0/16 (client network: 169.254.c.0, backend: 169.254.c+1.0). */
function chooseSubnets(): number {
  const taken = run('ip', ['-4', '-o', 'addr', 'show']);
  for (let attempt = 0; attempt < 200; attempt++) {
    const c = 20 + 2 * Math.floor(Math.random() * 110);
    if (subnetsInUse.has(c) || taken.includes(`169.254.${c}.`) || taken.includes(`169.254.${c + 1}.`)) continue;
    subnetsInUse.add(c);
    return c;
  }
  throw new Error('no free pair of 169.254.x.0/24 subnets');
}

/**
 * The lab's network, in namespaces named `<prefix>-<role>` (see names.ts), link-local
 * addresses only:
 *
 *   root ns (the test: clients, relays) ──veth── hub ns: bridge "brc" (client net 169.254.c.0/24)
 *                                        ──veth──         bridge "brb" (backend net 169.254.c+1.0/24)
 *   node ns n<i>:  c0 ──veth── brc (169.254.c.10+i),  b0 ──veth── brb (169.254.c+1.10+i)
 *   member ns m<j>: b0 ──veth── brb (169.254.c+1.100+j)
 *
 * A node has one link to the clients and another to etcd, so each can be cut on its own; members
 * reach each other and the nodes over the backend bridge only. The root namespace sits on both
 * networks (its clients reach the nodes; its relays sit between nodes and members). Nothing
 * routes: no namespace has a default route, and every address is on-link.
 */
export class NetLab {
  readonly root: {
    readonly clientAddress: string;
    readonly backendAddress: string;
    readonly clientLink: readonly LinkEnd[];
    readonly backendLink: readonly LinkEnd[];
  };
  readonly nodes: Host[] = [];
  readonly members: Host[] = [];
  private readonly namespaces: string[] = [];
  private readonly hub: string;
  private readonly client: number;
  private readonly forgetExitHook: () => void;
  private destroyed = false;

  private constructor(readonly prefix: string) {
    this.hub = `${prefix}-hub`;
    this.client = chooseSubnets();
    this.forgetExitHook = onProcessExit(() => this.destroy());
    this.root = {
      clientAddress: this.address('c', 1),
      backendAddress: this.address('b', 1),
      clientLink: [
        { ns: undefined, dev: `${prefix}c` },
        { ns: this.hub, dev: 'c-root' },
      ],
      backendLink: [
        { ns: undefined, dev: `${prefix}b` },
        { ns: this.hub, dev: 'b-root' },
      ],
    };
  }

  /** Builds the lab (removing leftovers of crashed runs first); destroy() removes all of it. */
  static create({ nodes, members }: { nodes: number; members: number }): NetLab {
    sweepLeftovers();
    const lab = new NetLab(newLabPrefix());
    try {
      lab.build(nodes, members);
    } catch (error) {
      lab.destroy();
      throw error;
    }
    return lab;
  }

  private address(net: 'c' | 'b', host: number): string {
    return `169.254.${net === 'c' ? this.client : this.client + 1}.${host}`;
  }

  private addNamespace(ns: string): void {
    run('ip', ['netns', 'add', ns]);
    this.namespaces.push(ns);
    ip(ns, 'link', 'set', 'lo', 'up');
  }

  /** A veth pair from `dev` in `ns` to `hubDev` on the hub's `bridge`, with `address` on `dev`. */
  private link(ns: string | undefined, dev: string, hubDev: string, bridge: string, address: string): void {
    ip(ns, 'link', 'add', dev, 'type', 'veth', 'peer', 'name', hubDev, 'netns', this.hub);
    ip(ns, 'addr', 'add', `${address}/24`, 'dev', dev);
    ip(ns, 'link', 'set', dev, 'up');
    ip(this.hub, 'link', 'set', hubDev, 'master', bridge, 'up');
  }

  private build(nodes: number, members: number): void {
    this.addNamespace(this.hub);
    for (const bridge of ['brc', 'brb']) {
      ip(this.hub, 'link', 'add', bridge, 'type', 'bridge');
      ip(this.hub, 'link', 'set', bridge, 'up');
    }
    this.link(undefined, this.root.clientLink[0]!.dev, 'c-root', 'brc', this.root.clientAddress);
    this.link(undefined, this.root.backendLink[0]!.dev, 'b-root', 'brb', this.root.backendAddress);
    for (let i = 1; i <= nodes; i++) this.nodes.push(this.addHost(`n${i}`, 10 + i, true));
    for (let j = 0; j < members; j++) this.members.push(this.addHost(`m${j}`, 100 + j, false));
  }

  /** A namespace with a backend link (and, for a node, a client link), host number `n` on each net. */
  private addHost(name: string, n: number, onClientNet: boolean): Host {
    const ns = `${this.prefix}-${name}`;
    this.addNamespace(ns);
    const host: Host = {
      name,
      ns,
      ...(onClientNet
        ? {
            clientAddress: this.address('c', n),
            clientLink: [
              { ns, dev: 'c0' },
              { ns: this.hub, dev: `c-${name}` },
            ],
          }
        : {}),
      backendAddress: this.address('b', n),
      backendLink: [
        { ns, dev: 'b0' },
        { ns: this.hub, dev: `b-${name}` },
      ],
    };
    if (onClientNet) this.link(ns, 'c0', `c-${name}`, 'brc', host.clientAddress!);
    this.link(ns, 'b0', `b-${name}`, 'brb', host.backendAddress);
    return host;
  }

  /**
   * Kills whatever still runs in the lab's namespaces and deletes them (the veth pairs, qdiscs
   * and the root namespace's ends go with them). Synchronous and idempotent.
   */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const ns of [...this.namespaces].reverse()) destroyNamespace(ns);
    // The root ends vanish with their hub peers; this only matters if the hub was never made.
    for (const end of [this.root.clientLink[0]!, this.root.backendLink[0]!]) run('ip', ['link', 'del', end.dev], { allowFailure: true });
    subnetsInUse.delete(this.client);
    this.forgetExitHook();
  }

  /** What of this lab is still on the machine (for a test that teardown removed everything). */
  leftovers(): string[] {
    const namespaces = run('ip', ['netns', 'list']);
    const links = run('ip', ['-o', 'link', 'show']);
    return [
      ...this.namespaces.filter((ns) => namespaces.includes(ns)),
      ...[this.root.clientLink[0]!.dev, this.root.backendLink[0]!.dev].filter((dev) => links.includes(`${dev}@`) || links.includes(`${dev}:`)),
    ];
  }
}
