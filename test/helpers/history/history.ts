import { performance } from 'node:perf_hooks';

export type Cmd = 'request' | 'location' | 'owner' | 'renew' | 'release' | 'releaseAll' | 'list';

/** One contender of a list (0x07) reply. */
export interface ListEntry {
  readonly index: string;
  readonly owner: string;
  readonly isOwner: boolean;
}

export type ReplyValue = number | string | boolean | readonly ListEntry[];

/**
 * One client operation: who sent what to which node, when (ms since the history began, one
 * monotonic clock for the whole test process), and the reply with the time it was received, or
 * none (`failure` says why: the connection closed, or no answer within the client's bound).
 */
export interface Op {
  readonly id: number;
  readonly client: string;
  readonly node: string;
  readonly cmd: Cmd;
  readonly key?: string;
  readonly index?: string;
  readonly owner?: string;
  readonly ttl?: number;
  readonly ttw?: number;
  readonly sent: number;
  replied?: number;
  reply?: ReplyValue;
  failure?: string;
}

export type OpInput = Omit<Op, 'id' | 'sent' | 'replied' | 'reply' | 'failure'>;

/** Records operations as clients send them and as their replies arrive. */
export class History {
  readonly ops: Op[] = [];
  private readonly origin = performance.now();

  now(): number {
    return Math.round((performance.now() - this.origin) * 10) / 10;
  }

  begin(input: OpInput): Op {
    const op: Op = { ...input, id: this.ops.length, sent: this.now() };
    this.ops.push(op);
    return op;
  }

  answer(op: Op, reply: ReplyValue): void {
    op.replied = this.now();
    op.reply = reply;
  }

  fail(op: Op, why: string): void {
    op.failure = why;
  }
}

/** One line per operation, for a failure report. */
export function describeOp(op: Op): string {
  const args = [op.key, op.index, op.owner].filter((a) => a !== undefined).join('/');
  const ttl = op.cmd === 'request' ? ` ttl=${op.ttl} ttw=${op.ttw}` : '';
  const reply = op.replied === undefined ? `no reply (${op.failure ?? 'pending'})` : `→ ${JSON.stringify(op.reply)} at ${op.replied}`;
  return `#${op.id} ${op.client}@${op.node} ${op.cmd}(${args})${ttl} sent ${op.sent} ${reply}`;
}
