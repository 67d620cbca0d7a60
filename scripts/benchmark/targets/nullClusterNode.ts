/**
 * The cluster's ceiling on this machine: a node that does the work of a cluster round outside our
 * lock code, and nothing else. Like the null server it cuts each connection's bytes into request
 * frames and answers them with canned replies; but it answers only once the frames have been
 * through etcd as a real node's batch goes:
 *
 * - the frames of all its connections gather into one batch at a time, sent by `EtcdLog.append`
 *   (the same transaction as a node's: the log key, the retained copy, the writer-lease fence,
 *   the version read back);
 * - it follows the log with `EtcdLog.watch`, so it receives every node's batches, and answers a
 *   batch's connections when that batch comes back on the watch, one write per connection;
 * - a batch queued behind an answered one waits, as the Committer's return wait does, until as
 *   many commands as that one answered have arrived, at most that round's time and
 *   RETURN_WAIT_MAX_MS (the bench's loads stay below the Committer's 4,096-command round).
 *
 * Nothing is decoded past the frame length, no table is kept, no batch is applied, no snapshot is
 * written: a load reaching N ops/s against three of these is what the platform (sockets, grpc-js,
 * the etcd members, the generator) leaves, on this machine in that run, for lock code built this
 * way (one batch in flight per node, appended and watched through etcd).
 *
 * With one sequencer (`--sequencer-port` on one node, `--forward-to` that port on the others), the
 * ceiling of the other way to build it, one commit per round for the whole cluster: a forwarding
 * node sends each batch over a loopback link to the sequencer instead of appending it; the
 * sequencer appends every batch it has (its own and forwarded ones) in one transaction, one append
 * in flight, what arrives meanwhile going in the next; after each append it waits up to 5 ms for a
 * batch of every node, as the real Sequencer does (see sequencedBatches.ts for the format).
 * Every node still watches the log and answers its batch when a value holding it comes back. What
 * such a design would add (a sequencer's failover, fencing each forwarded batch by its own node's
 * writer lease) is not here: this measures only whether the platform leaves more room for it.
 *
 *   node dist/scripts/benchmark/targets/nullClusterNode.js --etcd URLS --cluster NAME --name N [--port P]
 *       [--sequencer-port P | --forward-to P]
 */
import { connect, createServer, type Socket } from 'node:net';
import { Command as Cli, Option } from 'commander';
import { asBuffer } from '../../../src/bytes.js';
import { RETURN_WAIT_MAX_MS } from '../../../src/cluster/Committer.js';
import { EtcdLog } from '../../../src/cluster/EtcdLog.js';
import { AppendRefusedError, type LogRecord } from '../../../src/cluster/ReplicatedLog.js';
import { CANNED_REPLIES, FrameCutter, GREETING } from './cannedReplies.js';
import { BatchCutter, holdsBatchTagged, lengthPrefixed, startsWithTag } from './sequencedBatches.js';

const LOOPBACK = '127.0.0.1';
const CALL_TIMEOUT_MS = 5_000;
/** The name's lease: kept alive while the process runs, as a node's. */
const NAME_LEASE_SECONDS = 10;

/** One batch: its frames, and the replies owed on each connection once it is committed and seen. */
interface Round {
  readonly frames: Buffer[];
  readonly replies: Map<Socket, Buffer[]>;
  count: number;
  /** The batch's first bytes, by which the watch recognises it: node name and sequence number. */
  tag: Buffer | undefined;
  sentAt: number;
}

const newRound = (): Round => ({ frames: [], replies: new Map(), count: 0, tag: undefined, sentAt: 0 });

const options = new Cli()
  .requiredOption('--etcd <urls>', 'etcd client URLs, comma-separated')
  .requiredOption('--cluster <name>', 'key prefix (a name no real node uses)')
  .requiredOption('--name <name>', "this node's name (tags its batches)")
  .addOption(new Option('--port <port>', 'TCP port (0: any)').default(0).argParser(Number))
  .addOption(
    new Option('--sequencer-port <port>', "also take the forwarding nodes' batches on this loopback port (0: any) and append them with ours")
      .argParser(Number)
      .conflicts('forwardTo'),
  )
  .addOption(new Option('--forward-to <port>', 'send each batch to the sequencer on this loopback port instead of appending it').argParser(Number))
  .parse()
  .opts<{ etcd: string; cluster: string; name: string; port: number; sequencerPort?: number; forwardTo?: number }>();
const isSequencer = options.sequencerPort !== undefined;
const sequenced = isSequencer || options.forwardTo !== undefined;

const log = new EtcdLog({ endpoints: options.etcd.split(','), cluster: options.cluster });
// As a node does: its name declares the log formats it reads, and a read of the declarations lets
// its appends store each batch once (a reference under the log key) when every live name reads them.
const claim = await log.claimName(options.name, undefined, NAME_LEASE_SECONDS, CALL_TIMEOUT_MS);
if (!claim.taken) fail(`name ${options.name} is held by ${claim.holder}`);
await log.peerView(CALL_TIMEOUT_MS);
const name = Buffer.from(options.name);
let seq = 0;
let open = newRound();
let inFlight: Round | undefined;
/** The return wait: commands still expected after the last answer before the queued batch goes, and until when at most. */
let returning = 0;
let holdUntil = 0;
let holdTimer: NodeJS.Timeout | undefined;

function fail(message: string): never {
  process.stderr.write(`event=failed detail=${JSON.stringify(message)}\n`);
  process.exit(1);
}

/** Refused appends in a row that a node retries, as the Committer does, before it gives up. */
const MAX_REFUSALS_IN_A_ROW = 20;
let refusalsInARow = 0;

/**
 * Appends `value`; a refusal (AppendRefusedError: nothing was committed, e.g. its writer lease was
 * revoked as overdue by a node that just started) is sent again at once, as a node's Committer
 * does; any other failure ends the process.
 */
function append(value: Buffer, then: () => void): void {
  log.append(value, CALL_TIMEOUT_MS).then(
    () => {
      refusalsInARow = 0;
      then();
    },
    (error: unknown) => {
      if (!(error instanceof AppendRefusedError) || ++refusalsInARow > MAX_REFUSALS_IN_A_ROW) fail(`append: ${(error as Error).message}`);
      append(value, then);
    },
  );
}

function maybeDispatch(): void {
  if (inFlight !== undefined || open.count === 0) return;
  const now = performance.now();
  if (returning > 0 && now < holdUntil) {
    holdTimer ??= setTimeout(() => {
      holdTimer = undefined;
      returning = 0;
      maybeDispatch();
    }, holdUntil - now);
    return;
  }
  returning = 0;
  if (holdTimer !== undefined) clearTimeout(holdTimer);
  holdTimer = undefined;
  const round = open;
  open = newRound();
  inFlight = round;
  round.tag = Buffer.alloc(1 + name.length + 4);
  round.tag[0] = name.length;
  name.copy(round.tag, 1);
  round.tag.writeUInt32BE(++seq, 1 + name.length);
  round.sentAt = now;
  const batch = Buffer.concat([round.tag, ...round.frames]);
  if (linkToSequencer !== undefined) {
    // One segment on the wire for the length and the batch.
    linkToSequencer.cork();
    for (const piece of lengthPrefixed(batch)) linkToSequencer.write(piece);
    linkToSequencer.uncork();
  } else if (isSequencer) gather(batch);
  else append(batch, () => {}); // answered from the watch
}

/** The sequencer's batches (length-prefixed) not appended yet, how many, and whether an append is in flight. */
const gathered: Buffer[] = [];
let gatheredBatches = 0;
let appending = false;
/** After an append, the next waits until it holds a batch per node, or GATHER_MS: as the real Sequencer does. */
let gatherTimer: NodeJS.Timeout | undefined;
const GATHER_MS = 5;
const NODES = 3;

/** The sequencer: `batch` goes in its next append, which goes once none is in flight and the gather ended. */
function gather(batch: Buffer): void {
  gathered.push(...lengthPrefixed(batch));
  gatheredBatches++;
  if (gatherTimer !== undefined && gatheredBatches >= NODES) endGather();
  else if (gatherTimer === undefined) appendGathered();
}

function endGather(): void {
  clearTimeout(gatherTimer);
  gatherTimer = undefined;
  appendGathered();
}

function appendGathered(): void {
  if (appending || gathered.length === 0) return;
  appending = true;
  const value = Buffer.concat(gathered);
  gathered.length = 0;
  gatheredBatches = 0;
  append(value, () => {
    appending = false;
    if (gatheredBatches >= NODES) appendGathered();
    else gatherTimer = setTimeout(endGather, GATHER_MS);
  });
}

/** Whether a log value holds the batch tagged `tag`. */
function holdsBatch(value: Buffer, tag: Buffer): boolean {
  return sequenced ? holdsBatchTagged(value, tag) : startsWithTag(value, tag);
}

function onRecords(records: readonly LogRecord[]): void {
  const round = inFlight;
  if (round === undefined) return;
  for (const record of records) {
    if (!holdsBatch(asBuffer(record.value), round.tag!)) continue;
    inFlight = undefined;
    for (const [socket, replies] of round.replies) if (!socket.destroyed) socket.write(Buffer.concat(replies));
    const now = performance.now();
    returning = round.count;
    holdUntil = now + Math.min(now - round.sentAt, RETURN_WAIT_MAX_MS);
    maybeDispatch();
    return;
  }
}

const server = createServer({ noDelay: true }, (socket) => {
  socket.on('error', () => {});
  socket.write(GREETING);
  const frames = new FrameCutter();
  const onFrame = (input: Buffer, offset: number, length: number): void => {
    open.frames.push(input.subarray(offset, offset + length));
    open.count++;
    if (returning > 0) returning--;
    let replies = open.replies.get(socket);
    if (replies === undefined) open.replies.set(socket, (replies = []));
    replies.push(CANNED_REPLIES[input[offset]!]!);
  };
  socket.on('data', (chunk: Buffer) => {
    if (!frames.feed(chunk, onFrame)) socket.destroy();
    maybeDispatch();
  });
});

/** The link to the sequencer, on a forwarding node. */
let linkToSequencer: Socket | undefined;
if (options.forwardTo !== undefined) {
  const link = connect({ port: options.forwardTo, host: LOOPBACK, noDelay: true });
  link.on('error', (error) => fail(`link to the sequencer: ${error.message}`));
  link.on('close', () => fail('link to the sequencer closed'));
  await new Promise((resolve) => link.once('connect', resolve));
  linkToSequencer = link;
}
/** What the ready line adds on the sequencer: the port the forwarding nodes are to connect to. */
let readySuffix = '';
if (options.sequencerPort !== undefined) {
  const links = createServer({ noDelay: true }, (link) => {
    link.on('error', () => {});
    const batches = new BatchCutter();
    link.on('data', (chunk: Buffer) => batches.feed(chunk, gather));
  });
  await new Promise<void>((resolve) => links.listen({ port: options.sequencerPort, host: LOOPBACK }, resolve));
  readySuffix = ` sequencer-port=${(links.address() as { port: number }).port}`;
}

const head = await log.head(CALL_TIMEOUT_MS);
log.watch(head.storeRevision + 1, { onRecords, onEnd: (why, detail) => fail(`watch ended (${why}): ${detail}`) });
server.listen({ port: options.port, host: LOOPBACK }, () => {
  const { port } = server.address() as { port: number };
  process.stderr.write(`event=ready server=null-cluster-node name=${options.name} port=${port}${readySuffix} pid=${process.pid}\n`);
});
process.on('SIGTERM', () => process.exit(0));
