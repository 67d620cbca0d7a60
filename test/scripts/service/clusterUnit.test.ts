import test from 'ava';
import { execFile } from 'node:child_process';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../../src/packageRoot.js';
import { tempDir } from '../../helpers/serverProcess.js';

// The cluster unit's ExecStart, run as systemd runs it: continued lines joined, `$$` turned into
// the shell's `$`, then `/bin/sh -c` with the environment file's settings. A stand-in for the
// server prints the arguments it was given, one a line.

const UNIT = join(PACKAGE_ROOT, 'scripts', 'service', 'lockserver-cluster.service');
const SERVER = '/usr/local/bin/lockserver';
const FIXED = [
  '--port',
  '7734',
  '--hosts',
  '/etc/lockserver/hosts',
  '--lock-file',
  '/var/lib/lockserver/lockserver.locks',
  '--stat-file',
  '/var/log/lockserver/lockserver.stats',
];

async function shellScript(): Promise<string> {
  const unit = (await readFile(UNIT, 'utf8')).replace(/\\\n/g, ' ');
  const execStart = /^ExecStart=\/bin\/sh -c '([^']*)'$/m.exec(unit);
  if (execStart === null) throw new Error(`no ExecStart=/bin/sh -c '…' line in ${UNIT}`);
  return execStart[1]!.replaceAll('$$', '$');
}

async function argumentsFor(t: Parameters<typeof tempDir>[0], settings: Record<string, string>): Promise<string[]> {
  const dir = await tempDir(t);
  const standIn = join(dir, 'lockserver');
  await writeFile(standIn, '#!/bin/sh\nfor argument; do printf "<%s>\\n" "$argument"; done\n');
  await chmod(standIn, 0o755);
  const script = (await shellScript()).replace(SERVER, standIn);
  const { stdout } = await promisify(execFile)('/bin/sh', ['-c', script], { cwd: dir, env: { PATH: process.env.PATH, ...settings }, timeout: 10_000 });
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.slice(1, -1));
}

test('the optional settings left out or empty pass no option, so the defaults apply', async (t) => {
  const required = { ETCD: 'http://e1:2379,http://e2:2379', NODE_NAME: 'lock-a' };
  const expected = [...FIXED, '--etcd', required.ETCD, '--name', 'lock-a'];
  t.deepEqual(await argumentsFor(t, required), expected);
  t.deepEqual(
    await argumentsFor(t, {
      ...required,
      CLUSTER: '',
      CANDIDATE_PRIORITY: '',
      COMMIT_TIMEOUT: '',
      ETCD_USER: '',
      EXTRA_ARGS: '',
      LOCKSERVER_ETCD_PASSWORD: '',
    }),
    expected,
  );
});

test('every setting given is passed; EXTRA_ARGS is split at blanks and not globbed', async (t) => {
  const args = await argumentsFor(t, {
    ETCD: 'http://e1:2379',
    NODE_NAME: 'lock-b',
    CLUSTER: 'jobs',
    CANDIDATE_PRIORITY: 'off',
    COMMIT_TIMEOUT: '9',
    ETCD_USER: 'lockserver',
    EXTRA_ARGS: '--metrics-port 9464   --etcd-cacert /etc/lockserver/*.pem',
  });
  t.deepEqual(args, [
    ...FIXED,
    '--etcd',
    'http://e1:2379',
    '--name',
    'lock-b',
    '--cluster',
    'jobs',
    '--candidate-priority',
    'off',
    '--commit-timeout',
    '9',
    '--etcd-user',
    'lockserver',
    '--metrics-port',
    '9464',
    '--etcd-cacert',
    '/etc/lockserver/*.pem',
  ]);
});
