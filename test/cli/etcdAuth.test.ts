import test from 'ava';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ETCD_PASSWORD_VARIABLE, EtcdAuthUsageError, etcdCredentials, etcdPasswordSource, parseEtcdUser, readEtcdPassword } from '../../src/cli/etcdAuth.js';
import { spawnCli, tempDir } from '../helpers/serverProcess.js';

const alice = { username: 'alice' };

test('--etcd-user takes a user name; user:password is still understood', (t) => {
  t.deepEqual(parseEtcdUser('alice'), alice);
  t.deepEqual(parseEtcdUser('alice:s3:cr3t'), { username: 'alice', password: 's3:cr3t' });
  t.throws(() => parseEtcdUser(''), { message: 'an empty user name.' });
  t.throws(() => parseEtcdUser(':secret'), { message: 'an empty user name.' });
});

test('the password comes from exactly one place: the file, the environment, or (deprecated) user:password', (t) => {
  const env = { [ETCD_PASSWORD_VARIABLE]: 'from-env' };
  t.deepEqual(etcdPasswordSource(alice, '/run/pw', {}), { from: 'file', file: '/run/pw' });
  t.deepEqual(etcdPasswordSource(alice, undefined, env), { from: 'environment', password: 'from-env' });
  t.deepEqual(etcdPasswordSource({ username: 'alice', password: 'x' }, undefined, {}), { from: 'command-line', password: 'x' });
  // An empty variable is a line left blank in an environment file, not a password.
  t.deepEqual(etcdPasswordSource(alice, '/run/pw', { [ETCD_PASSWORD_VARIABLE]: '' }), { from: 'file', file: '/run/pw' });
  t.is(etcdPasswordSource(undefined, undefined, env), undefined, 'the variable alone does nothing');

  const usage = (f: () => unknown, message: string): void => void t.throws(f, { instanceOf: EtcdAuthUsageError, message });
  usage(() => etcdPasswordSource(alice, undefined, {}), `--etcd-user alice needs a password: set ${ETCD_PASSWORD_VARIABLE} or give --etcd-password-file`);
  usage(() => etcdPasswordSource(undefined, '/run/pw', {}), '--etcd-password-file needs --etcd-user');
  usage(
    () => etcdPasswordSource(alice, '/run/pw', env),
    `the etcd password is given 2 ways (--etcd-password-file, ${ETCD_PASSWORD_VARIABLE}); give it one way`,
  );
  usage(
    () => etcdPasswordSource({ username: 'alice', password: 'x' }, undefined, env),
    `the etcd password is given 2 ways (--etcd-user user:password, ${ETCD_PASSWORD_VARIABLE}); give it one way`,
  );
});

test('a password file: its content without one final line break; unreadable or empty, an error naming the file', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'etcd-password');
  await writeFile(file, ' pass word \n');
  t.is(await readEtcdPassword(file), ' pass word ');
  await writeFile(file, 'crlf\r\n');
  t.deepEqual(await etcdCredentials(alice, { from: 'file', file }), { username: 'alice', password: 'crlf' });
  await writeFile(file, '\n');
  await t.throwsAsync(readEtcdPassword(file), { message: `--etcd-password-file ${file} is empty` });
  const missing = join(dir, 'missing');
  await t.throwsAsync(readEtcdPassword(missing), { message: new RegExp(`^cannot read --etcd-password-file ${missing}: ENOENT`) });
});

// The server itself: a password file it cannot read stops the start (exit 1) before anything
// connects to etcd; so does a user with no password, as a bad command line (exit 2).

test('lockserver --etcd-password-file: an unreadable file fails the start, naming it', async (t) => {
  const dir = await tempDir(t);
  const missing = join(dir, 'no-such-password-file');
  const server = spawnCli(t, ['--port', '0', '--etcd', 'http://127.0.0.1:9', '--etcd-user', 'alice', '--etcd-password-file', missing], dir);
  const failed = await server.event('start-failed');
  t.regex(failed.fields.error!, new RegExp(`^cannot read --etcd-password-file ${missing}: ENOENT`));
  t.like(await server.waitForExit(), { code: 1 });
});

test('lockserver --etcd-user without a password: exit 2 saying where it may come from', async (t) => {
  const dir = await tempDir(t);
  const server = spawnCli(t, ['--port', '0', '--etcd', 'http://127.0.0.1:9', '--etcd-user', 'alice'], dir);
  t.like(await server.waitForExit(), { code: 2 });
  t.is(server.stderr, `error: --etcd-user alice needs a password: set ${ETCD_PASSWORD_VARIABLE} or give --etcd-password-file`);
});

test('lockserver --etcd-user user:password still starts, logging that it is deprecated and why', async (t) => {
  const dir = await tempDir(t);
  const server = spawnCli(t, ['--port', '0', '--etcd', 'http://127.0.0.1:9', '--etcd-user', 'alice:secret', '--lock-file', join(dir, 'locks')], dir);
  const deprecated = await server.event('option-deprecated');
  t.is(deprecated.fields.option, '--etcd-user user:password');
  t.regex(deprecated.fields.instead!, new RegExp(ETCD_PASSWORD_VARIABLE));
  t.false(server.stderr.includes('secret'), 'the password is not logged');
});
