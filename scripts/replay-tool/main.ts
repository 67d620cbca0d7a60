import { readFile } from 'node:fs/promises';
import { Command, InvalidArgumentError } from 'commander';
import { byteString, type ByteString } from '../../src/bytes.js';
import { ETCD_PASSWORD_VARIABLE, etcdCredentials, etcdPasswordSource, parseEtcdUser, type EtcdUserOption } from '../../src/cli/etcdAuth.js';
import { parseClusterName, parseEndpoints, parseFileName } from '../../src/cli/options.js';
import { DEFAULT_CLUSTER_NAME } from '../../src/cluster/startClusterService.js';
import { EtcdHistory } from '../../src/cluster/replay/EtcdHistory.js';
import { HistoryLostError } from '../../src/cluster/replay/ClusterHistory.js';
import { formatCommand, formatReport } from '../../src/cluster/replay/formatReplay.js';
import { replayHistory } from '../../src/cluster/replay/replayHistory.js';

/** Exit codes: 0 the state matches the snapshot (or there was none to check), 1 a mismatch, 2 usage, 3 history lost or etcd unreachable. */
const MISMATCH = 1;
const HISTORY_LOST = 3;

interface Options {
  etcd: string[];
  cluster: string;
  hex: boolean;
  etcdCacert?: string;
  etcdCert?: string;
  etcdKey?: string;
  etcdUser?: EtcdUserOption;
  etcdPasswordFile?: string;
}

/** A key or index as given: its UTF-8 bytes, or hex digits with --hex. */
function bytesArgument(value: string, hex: boolean): ByteString {
  if (!hex) return byteString(Buffer.from(value, 'utf8'));
  if (!/^([0-9a-fA-F]{2})*$/.test(value)) throw new InvalidArgumentError(`"${value}" is not hex bytes.`);
  return byteString(Buffer.from(value, 'hex'));
}

const program = new Command()
  .name('replay')
  .description(
    "replays a lock cluster's history from etcd with the code every node runs (LogCodec, ReplicaState): prints every command on KEY " +
      "(and INDEX) with its log position, proposer, result and the queue after, then compares the state with the cluster's newest snapshot",
  )
  .argument('<key>', 'the lock key (its UTF-8 bytes; hex with --hex)')
  .argument('[index]', 'only this index of the key')
  .requiredOption('--etcd <urls>', 'etcd endpoints, comma-separated (e.g. http://127.0.0.1:2379)', parseEndpoints)
  .option('--cluster <name>', "the cluster's name, prefix of its etcd keys", parseClusterName, DEFAULT_CLUSTER_NAME)
  .option('--hex', 'KEY and INDEX are hex digits (for bytes that are not text)', false)
  .option('--etcd-cacert <file>', 'CA certificate to verify etcd (TLS)', parseFileName)
  .option('--etcd-cert <file>', 'client certificate for etcd (TLS)', parseFileName)
  .option('--etcd-key <file>', 'client key for etcd (TLS)', parseFileName)
  .option(
    '--etcd-user <user>',
    `etcd user (reading /<cluster>/ is enough); its password from $${ETCD_PASSWORD_VARIABLE} or --etcd-password-file`,
    parseEtcdUser,
  )
  .option('--etcd-password-file <file>', "a file holding the etcd user's password", parseFileName)
  .addHelpText(
    'after',
    '\nExit status: 0 when the replayed state matches the newest snapshot (or there is none to compare with), 1 on a mismatch,\n' +
      '3 when etcd no longer holds a version the replay needs (compacted and not retained) or cannot be read.',
  )
  .parse();

const options = program.opts<Options>();
const [keyArgument, indexArgument] = program.processedArgs as [string, string | undefined];
let key: ByteString = '';
let index: ByteString | undefined;
try {
  key = bytesArgument(keyArgument, options.hex);
  index = indexArgument === undefined ? undefined : bytesArgument(indexArgument, options.hex);
} catch (error) {
  program.error(`error: ${(error as Error).message}`); // exits
}

const read = (file: string | undefined): Promise<Buffer | undefined> => (file === undefined ? Promise.resolve(undefined) : readFile(file));
let history: EtcdHistory | undefined;
try {
  const password = etcdPasswordSource(options.etcdUser, options.etcdPasswordFile, process.env);
  history = new EtcdHistory({
    endpoints: options.etcd,
    cluster: options.cluster,
    caCert: await read(options.etcdCacert),
    cert: await read(options.etcdCert),
    key: await read(options.etcdKey),
    user: options.etcdUser === undefined || password === undefined ? undefined : await etcdCredentials(options.etcdUser, password),
  });
  const report = await replayHistory(
    history,
    { key, index },
    { command: (c) => console.log(formatCommand(c)), refused: (r) => console.log(`v${r.version} refused: ${r.reason}`) },
  );
  for (const line of formatReport(report)) console.log(line);
  process.exitCode = report.check.outcome === 'mismatch' ? MISMATCH : 0;
} catch (error) {
  console.error(`replay: ${error instanceof HistoryLostError ? 'history lost: ' : ''}${(error as Error).message}`);
  process.exitCode = HISTORY_LOST;
} finally {
  await history?.close();
}
