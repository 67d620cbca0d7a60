#!/usr/bin/env node
import { Command, CommanderError, InvalidArgumentError, Option, type HelpContext } from 'commander';
import type { ByteString } from '../bytes.js';
import { FencingUnsupportedError } from '../client/errors.js';
import { HOST_ORDERS, parseHostList, type HostOrder } from '../client/hosts.js';
import { DEFAULT_HOST, DEFAULT_PRIORITY, DEFAULT_TTL_SECONDS, DEFAULT_TTW_SECONDS, LockClient } from '../client/LockClient.js';
import { DEFAULT_PORT } from '../defaultPort.js';
import { formatStats } from '../files/statFile.js';
import type { LockRequest } from '../locks/LockService.js';
import { PACKAGE_VERSION } from '../packageVersion.js';
import { ExitCode, exitCodeFor } from './lockctl/exitCodes.js';
import { holdOwner, MAX_KILL_AFTER_SHARE_OF_TTL, runHold } from './lockctl/hold.js';
import { parseName } from './lockctl/nameArgument.js';
import { KeyLister } from './lockctl/listing.js';
import { describePosition, jsonBytes, listingJson, listingTable, shown, tokenField, withToken } from './lockctl/render.js';
import { runWatch } from './lockctl/watch.js';
import { integerIn } from './options.js';

const DEFAULT_TIMEOUT_SECONDS = 5;
const DEFAULT_WATCH_INTERVAL_SECONDS = 1;
/** owner asks 0x01 then 0x09; an owner that let go in between is asked about again, at most this often in all. */
const OWNER_ATTEMPTS = 3;
const MAX_SECONDS = 86_400;
const MS_PER_SECOND = 1000;

interface GlobalOptions {
  host: string;
  port: number;
  hostOrder: HostOrder;
  timeout: number;
  json: boolean;
}

interface RequestOptions {
  ttl: number;
  ttw: number;
  priority: number;
}

function seconds(min: number): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (!/^\d+(\.\d+)?$/.test(value.trim()) || parsed < min || parsed > MAX_SECONDS) {
      throw new InvalidArgumentError(`"${value}" is not a number of seconds from ${min} to ${MAX_SECONDS}.`);
    }
    return parsed;
  };
}

const parseTtl = integerIn(0, 0xffff);
const parsePriority = integerIn(0, 0xff);

const out = (text: string): void => void process.stdout.write(text);
const warn = (message: string): void => void process.stderr.write(`lockctl: ${message}\n`);
const json = (value: unknown): void => out(JSON.stringify(value) + '\n');

/**
 * A failure: its message on stderr and, with --json, also one object on stdout, so that a script
 * reading stdout gets an answer on every path (`{"error":"cannot connect to …","exitCode":3}`).
 */
function fail(message: string, exitCode: number, asJson: boolean): void {
  warn(message);
  if (asJson) json({ error: message, exitCode });
}

/** --json among the arguments lockctl itself reads (not after `--`, where hold's command begins). */
function jsonRequested(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

/** Connects, runs one subcommand, closes; the subcommand's result (or failure) becomes the exit code. */
async function execute(command: Command, body: (client: LockClient, options: GlobalOptions) => Promise<number>): Promise<void> {
  const options = command.optsWithGlobals<GlobalOptions>();
  let client: LockClient | undefined;
  try {
    client = await LockClient.connect({
      hosts: parseHostList(options.host, options.port),
      hostOrder: options.hostOrder,
      connectTimeoutMs: options.timeout * MS_PER_SECOND,
      requestTimeoutMs: options.timeout * MS_PER_SECOND,
    });
    process.exitCode = await body(client, options);
  } catch (error) {
    process.exitCode = exitCodeFor(error);
    fail((error as Error).message, process.exitCode, options.json);
  } finally {
    await client?.close().catch(() => {});
  }
}

const EXIT_CODES_HELP = `
Keys, indexes and owners are sent as their UTF-8 bytes; \\xHH stands for the byte 0xHH. Bytes
that are not printable ASCII are shown as \\xHH (a backslash as \\x5c), so output can be pasted back.

Exit codes:
  0    done; a positive answer
  1    a negative answer: no owner, not the owner (queued or refused), no such entry,
       nothing released; hold: not obtained within --wait, or refused by a draining
       server (-E N makes that N); hold without a command: the lock was lost
  2    bad command line
  3    cannot talk to the server: connection refused, unreachable, or refused by the server
       (greeting 0x00: not in its hosts file or too busy), or the connection broke;
       with several --host nodes: none of them gave a connection
  4    no connection or no reply within --timeout (with several nodes: every one timed out)
  70   a bug in lockctl, or hold's watchdog died before its command ended
  130, 143  hold: SIGINT or SIGTERM while waiting for the lock (no waiting entry is left)
  hold with a command exits with the command's status (128+N if killed by signal N,
  127 not found, 126 not executable).

hold makes the owner OWNER@PID.HOSTNAME, unique to this lockctl: two holds with the same
  arguments never run at once (the second waits, as with flock). The command runs under a
  watchdog that holds the lock's deadline (the last confirmed renewal's send + TTL): should
  lockctl die (even by kill -9) or stop (SIGSTOP, a freezer) or the lock be lost, the command
  and every process under it get SIGTERM, then SIGKILL --kill-after s later (5 s, a third of
  the TTL if less), all before that deadline. The command gets
  LOCKCTL_KEY, LOCKCTL_INDEX and LOCKCTL_OWNER (the owner used, as lockctl prints it) and
  LOCKCTL_TOKEN, the lock's fencing token (unset when the server has none: 0.9b).

Environment: LOCKCTL_HOST and LOCKCTL_PORT stand for --host and --port; the flags win.`;

/**
 * `lockctl` alone is a usage error: one usage line and a hint on stderr, exit 2 — not the whole
 * help, which `lockctl --help` prints on stdout.
 */
class LockctlProgram extends Command {
  override help(context?: HelpContext | ((text: string) => string)): never {
    if (typeof context === 'function' || context?.error !== true) return super.help(context as HelpContext);
    process.stderr.write(`Usage: lockctl [options] <subcommand> …\nlockctl: no subcommand given; 'lockctl --help' lists them and the options\n`);
    throw new CommanderError(ExitCode.Usage, 'lockctl.noSubcommand', 'no subcommand given');
  }
}

const program = new LockctlProgram()
  .name('lockctl')
  .description('Inspect and use a LockServer 0.9b: look up, take, renew and release locks; run a command under a lock.')
  .version(PACKAGE_VERSION, '-V, --version')
  .addOption(
    new Option('-H, --host <hosts>', 'server host name or address, or several nodes of one cluster: a:7734,b,[::1]:7735')
      .env('LOCKCTL_HOST')
      .default(DEFAULT_HOST),
  )
  .addOption(
    new Option('-p, --port <n>', 'server port (1-65535), for hosts that name none').env('LOCKCTL_PORT').argParser(integerIn(1, 65535)).default(DEFAULT_PORT),
  )
  .addOption(
    new Option('--host-order <order>', 'with several hosts: start at a random one, or at the first; then on through the list')
      .choices(HOST_ORDERS)
      .default('random-start'),
  )
  .option('-t, --timeout <seconds>', 'limit for connecting and for each reply', seconds(0.001), DEFAULT_TIMEOUT_SECONDS)
  .option('--json', 'one JSON object per answer on stdout, for scripts', false)
  .addHelpText('after', EXIT_CODES_HELP)
  .exitOverride()
  .configureOutput({ outputError: (text, write) => write(text.replace(/\n+$/, '') + '\n') });

function requestOptions(command: Command, ttwHelp = 'how long a waiter stays queued without renewal (0 = forever)'): Command {
  return command
    .option('--ttl <seconds>', 'how long the owner keeps the lock without renewal (0 = forever)', parseTtl, DEFAULT_TTL_SECONDS)
    .option('--ttw <seconds>', ttwHelp, parseTtl, DEFAULT_TTW_SECONDS)
    .option('--priority <n>', 'waiters with higher priority go first (0-255)', parsePriority, DEFAULT_PRIORITY);
}

program
  .command('stats')
  .description('server statistics (0x08)')
  .action((_options, command: Command) =>
    execute(command, async (client, { json: asJson }) => {
      const stats = await client.stats();
      if (asJson) json(stats);
      else out(formatStats(stats));
      return ExitCode.Ok;
    }),
  );

/** A subcommand taking KEY INDEX, then OWNER when `ownerHelp` is given. */
function lockSubcommand(name: string, description: string, ownerHelp?: string, indexHelp = 'lock index'): Command {
  const command = program.command(name).description(description).argument('<key>', 'lock key', parseName).argument('<index>', indexHelp, parseName);
  return ownerHelp === undefined ? command : command.argument('<owner>', ownerHelp, parseName);
}

type EntryAnswer = (client: LockClient, entry: { key: ByteString; index: ByteString; owner: ByteString }, options: GlobalOptions) => Promise<number>;

/** The action of a KEY INDEX OWNER subcommand. */
function entryAction(answer: EntryAnswer) {
  return (key: ByteString, index: ByteString, owner: ByteString, _options: unknown, command: Command) =>
    execute(command, (client, options) => answer(client, { key, index, owner }, options));
}

/** The owner's fencing token (0x09), or undefined from a server that closed the connection instead (0.9b). */
async function tokenOf(client: LockClient, key: ByteString, index: ByteString, owner: Buffer): Promise<number | undefined> {
  try {
    return await client.fence(key, index, owner);
  } catch (error) {
    if (error instanceof FencingUnsupportedError) return undefined;
    throw error;
  }
}

lockSubcommand('owner', 'who owns KEY/INDEX (0x01), and the fencing token of its grant (0x09); exit 1 when nobody does').action(
  (key: ByteString, index: ByteString, _options, command: Command) =>
    execute(command, async (client, { json: asJson }) => {
      let owner: Buffer;
      let token: number | undefined = 0;
      for (let attempt = 1; ; attempt++) {
        owner = await client.findOwner(key, index);
        if (owner.length === 0) break;
        token = await tokenOf(client, key, index, owner);
        if (token !== 0 || attempt === OWNER_ATTEMPTS) break;
      }
      const free = owner.length === 0;
      if (asJson) json({ ...jsonBytes('owner', owner), free, ...tokenField(token) });
      else if (free) warn(`${shown(key)}/${shown(index)} has no owner`);
      else out(withToken(shown(owner), token) + '\n');
      return free ? ExitCode.No : ExitCode.Ok;
    }),
);

/** Request with fence (0x0A); from a server that closed the connection on it (0.9b), a request (0x02) through a new connection. */
async function requestFencedOrPlain(client: LockClient, entry: LockRequest): Promise<{ position: number; token?: number }> {
  try {
    return await client.requestFenced(entry.key, entry.index, entry.owner, entry);
  } catch (error) {
    if (!(error instanceof FencingUnsupportedError)) throw error;
  }
  const plain = await client.reconnect();
  try {
    return { position: await plain.request(entry.key, entry.index, entry.owner, entry) };
  } finally {
    await plain.close().catch(() => {});
  }
}

requestOptions(
  lockSubcommand(
    'request',
    'ask for KEY/INDEX as OWNER, or renew that request (0x0A: 0x02 with the fencing token); exit 0 only when OWNER owns it',
    'who asks',
  ),
).action((key: ByteString, index: ByteString, owner: ByteString, options: RequestOptions, command: Command) =>
  execute(command, async (client, { json: asJson }) => {
    const { position, token } = await requestFencedOrPlain(client, { key, index, owner, ...options });
    if (asJson) json({ position, isOwner: position === 1, refused: position === 0, ...tokenField(token) });
    else out(withToken(describePosition(position, 'refused: the server is draining or its table is full'), position === 1 ? token : undefined) + '\n');
    return position === 1 ? ExitCode.Ok : ExitCode.No;
  }),
);

lockSubcommand('fence', "the fencing token of OWNER's grant of KEY/INDEX (0x09); exit 1 (token 0) when OWNER does not own it", 'whose grant').action(
  entryAction(async (client, { key, index, owner }, { json: asJson }) => {
    const token = await client.fence(key, index, owner);
    if (asJson) json({ token, isOwner: token > 0 });
    else out(token > 0 ? `${token}\n` : '0 not the owner\n');
    return token > 0 ? ExitCode.Ok : ExitCode.No;
  }),
);

lockSubcommand('location', "OWNER's place in the KEY/INDEX queue (0x03); exit 1 when not queued", 'whose place').action(
  entryAction(async (client, { key, index, owner }, { json: asJson }) => {
    const position = await client.location(key, index, owner);
    if (asJson) json({ position });
    else out(describePosition(position, 'not queued') + '\n');
    return position === 0 ? ExitCode.No : ExitCode.Ok;
  }),
);

lockSubcommand('renew', "restart the timer of OWNER's entry (0x04); exit 1 when there is none", 'whose entry').action(
  entryAction(async (client, { key, index, owner }, { json: asJson }) => {
    const renewed = await client.renew(key, index, owner);
    if (asJson) json({ renewed });
    else out(renewed ? 'renewed\n' : 'no such entry\n');
    return renewed ? ExitCode.Ok : ExitCode.No;
  }),
);

lockSubcommand(
  'release',
  "remove OWNER's entry (0x05); INDEX '*' removes it under every index of KEY; exit 1 when none",
  'whose entry',
  "lock index, or '*' for all",
).action(entryAction(async (client, { key, index, owner }, options) => reportReleased(await client.release(key, index, owner), options)));

program
  .command('release-all')
  .description('remove every entry of OWNER under any key (0x06); exit 1 when none')
  .argument('<owner>', 'whose entries', parseName)
  .action((owner: ByteString, _options, command: Command) =>
    execute(command, async (client, options) => reportReleased(await client.releaseAll(owner), options)),
  );

function reportReleased(released: number, { json: asJson }: GlobalOptions): number {
  if (asJson) json({ released });
  else out(`released ${released}\n`);
  return released > 0 ? ExitCode.Ok : ExitCode.No;
}

program
  .command('list')
  .description(
    "every entry under KEY, each queue in order, as a table: each entry's time left (LEFT) and token, and a lock held back " +
      "after its owner's TTL ran out (--lock-delay) with the delay left (0x0D; 0x07, without those, from a LockServer 0.9b)",
  )
  .summary("every entry under KEY, each queue in order, with each one's time left and token (0x0D), as a table")
  .argument('<key>', 'lock key', parseName)
  .action((key: ByteString, _options, command: Command) =>
    execute(command, async (client, { json: asJson }) => {
      const lister = new KeyLister(client);
      try {
        const listing = await lister.list(key);
        const table = listingTable(listing);
        if (asJson) json(listingJson(key, listing));
        else out(table !== '' ? table : `no entries under ${shown(key)}\n`);
      } finally {
        await lister.close();
      }
      return ExitCode.Ok;
    }),
  );

program
  .command('watch')
  .description('list KEY again every interval, until --count refreshes or Ctrl-C; it asks anew each time, as the protocol has no notice of changes to a key')
  .summary('list KEY again every interval, until --count refreshes or Ctrl-C')
  .argument('<key>', 'lock key', parseName)
  .option('-i, --interval <seconds>', 'pause between refreshes', seconds(0.01), DEFAULT_WATCH_INTERVAL_SECONDS)
  .option('-n, --count <n>', 'stop after this many refreshes (0 = until Ctrl-C)', integerIn(0, 1_000_000_000), 0)
  .action((key: ByteString, options: { interval: number; count: number }, command: Command) =>
    execute(command, async (client, { json: asJson }) => {
      await runWatch(client, {
        key,
        intervalMs: options.interval * MS_PER_SECOND,
        count: options.count,
        json: asJson,
        // isTTY is undefined, not false, when stdout is not a terminal (Node's types say boolean).
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-boolean-literal-compare
        clearScreen: process.stdout.isTTY === true && !asJson,
        write: out,
      });
      return ExitCode.Ok;
    }),
  );

requestOptions(
  lockSubcommand(
    'hold',
    "wait until the lock is ours, run COMMAND while renewing it, release it after; exits with the command's status. " +
      'The owner is made unique to this lockctl: OWNER@PID.HOSTNAME. Without a command: say which lock is held, hold it until SIGINT, SIGTERM or SIGHUP, release it, exit 0. ' +
      'It waits without polling (0x0B) and is told of a loss at once (0x0C), where the server has them; from a LockServer 0.9b it polls',
    'who holds it (hold adds @PID.HOSTNAME)',
  )
    .summary("run COMMAND under the lock (or hold it until a signal); exits with the command's status")
    .argument('[command...]', "the command and its arguments (after '--')")
    .option('-c, --command <shell>', 'run this command line through /bin/sh -c (instead of COMMAND after --)')
    .option('-w, --wait <seconds>', 'give up if the lock is not ours by then (exit: --conflict-exit-code); default: wait', seconds(0))
    .option(
      '-k, --kill-after <seconds>',
      'when the command is stopped (the lock lost, its TTL about to run out unrenewed, lockctl gone): SIGKILL this long after SIGTERM to what is left of it and what it started (as timeout -k); at most half the TTL. Default: 5, or a third of the TTL if less',
      seconds(0),
    )
    .addOption(
      new Option('-E, --conflict-exit-code <n>', 'exit code when the lock was not ours within --wait, or the server refused it (as flock -E)')
        .argParser(integerIn(0, 255))
        .default(ExitCode.No),
    ),
  'how long the waiting entry stays queued without renewal; the wait (0x0B) is sent again every third of it, which renews it, and polls renew it (0 = forever: a wait then lasts as long as its connection)',
).action(
  (
    key: ByteString,
    index: ByteString,
    givenOwner: ByteString,
    argv: string[],
    options: RequestOptions & { wait?: number; command?: string; conflictExitCode: number; killAfter?: number },
    command: Command,
  ) => {
    const { json: asJson } = command.optsWithGlobals<GlobalOptions>();
    if (options.command !== undefined && argv.length > 0) {
      process.exitCode = ExitCode.Usage;
      return fail("give the command after '--' or with -c, not both", ExitCode.Usage, asJson);
    }
    if (options.killAfter !== undefined && options.ttl > 0 && options.killAfter > options.ttl * MAX_KILL_AFTER_SHARE_OF_TTL) {
      process.exitCode = ExitCode.Usage;
      return fail(
        `--kill-after ${options.killAfter} is more than half the TTL (${options.ttl} s): the command is stopped that long before the lock's deadline, which must leave time for renewals`,
        ExitCode.Usage,
        asJson,
      );
    }
    let owner: ByteString;
    try {
      owner = holdOwner(givenOwner);
    } catch (error) {
      process.exitCode = ExitCode.Usage;
      return fail((error as Error).message, ExitCode.Usage, asJson);
    }
    return execute(command, (client) =>
      runHold(
        client,
        {
          key,
          index,
          owner,
          ttl: options.ttl,
          ttw: options.ttw,
          priority: options.priority,
          waitSeconds: options.wait,
          conflictExitCode: options.conflictExitCode,
          command: options.command === undefined ? argv : ['/bin/sh', '-c', options.command],
          killAfterSeconds: options.killAfter,
        },
        { warn, out, json: asJson ? json : undefined },
      ),
    );
  },
);

async function main(): Promise<void> {
  try {
    await program.parseAsync(process.argv);
  } catch (error) {
    // commander exits 1 on usage errors; like lockserver, lockctl uses 2. Help and --version exit 0.
    if (error instanceof CommanderError) {
      process.exitCode = error.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage;
      // commander has written the message to stderr already; --json adds it on stdout.
      if (error.exitCode !== 0 && jsonRequested(process.argv.slice(2))) json({ error: error.message.replace(/^error: /, ''), exitCode: ExitCode.Usage });
      return;
    }
    throw error;
  }
}

void main();
