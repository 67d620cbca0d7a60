import { mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { FileFormatError } from '../../src/files/FileFormatError.js';
import { decodeField, encodeField, formatLockFile, loadLockFile, parseLockFile, saveLockFile } from '../../src/files/lockFile.js';
import type { SavedLock } from '../../src/locks/LockService.js';

const every = String.fromCharCode(...Array.from({ length: 255 }, (_, i) => i));

const LOCKS: SavedLock[] = [
  { key: 'users', index: '42', owner: 'alice', priority: 10, ttl: 30, ttw: 60, isOwner: true, remainingMs: 29500 },
  { key: 'users', index: '42', owner: 'bob smith', priority: 0, ttl: 30, ttw: 0, isOwner: false, remainingMs: null },
  { key: '', index: '-', owner: '%41', priority: 255, ttl: 65535, ttw: 65535, isOwner: true, remainingMs: 0 },
  { key: every, index: '\x00', owner: '\xff\xfe', priority: 1, ttl: 1, ttw: 1, isOwner: true, remainingMs: 1 },
];

test('fields round-trip every byte; the text stays printable ASCII with no blanks', (t) => {
  for (const value of ['', '-', '--', '%', '%2D', 'a b', 'a#b', every, '\xc3\xa9']) {
    const field = encodeField(value);
    t.regex(field, /^[\x21-\x7e]+$/);
    t.is(decodeField(field), value);
  }
  t.is(encodeField('users'), 'users');
  t.is(encodeField('a b%'), 'a%20b%25');
});

test('format then parse gives back every entry in order', (t) => {
  const text = [...formatLockFile(LOCKS, new Date(0))].join('');
  t.true(text.startsWith('lockserver-locks 1\n'));
  t.true(text.includes('\nusers 42 alice 10 30 60 owner 29500\n'));
  t.deepEqual(parseLockFile(text, 'x'), LOCKS);
});

test('an empty table is a valid file with just the header', (t) => {
  const text = [...formatLockFile([])].join('');
  t.deepEqual(parseLockFile(text, 'x'), []);
});

test('every kind of bad line is named by file and line', (t) => {
  const header = 'lockserver-locks 1\n';
  const cases: Array<[string, number, RegExp]> = [
    ['not a lock file\n', 1, /header/],
    [header + 'users 42 alice 10 30 60 owner\n', 2, /8 fields/],
    [header + 'users 42 alice 256 30 60 owner 1\n', 2, /priority/],
    [header + 'users 42 alice 1 70000 60 owner 1\n', 2, /ttl/],
    [header + 'users 42 alice 1 1 -1 owner 1\n', 2, /ttw/],
    [header + 'users 42 alice 1 1 1 boss 1\n', 2, /role/],
    [header + 'users 42 alice 1 1 1 owner soon\n', 2, /remaining/],
    [header + 'users 42 al%ZZce 1 1 1 owner 1\n', 2, /owner field/],
    [header + '\n# c\nk i a 1 1 1 owner 1\nk i b 1 1 1 owner 1\n', 5, /second owner/],
    [header + 'k i a 1 1 1 owner 1\nk i a 1 1 1 waiter 1\n', 3, /twice/],
    [header + `${'x'.repeat(256)} i a 1 1 1 owner 1\n`, 2, /key field/],
  ];
  for (const [text, line, reason] of cases) {
    const error = t.throws(() => parseLockFile(text, '/var/lib/lockserver.locks'), { instanceOf: FileFormatError });
    t.is(error?.line, line, text);
    t.regex(error!.message, /^\/var\/lib\/lockserver\.locks:\d+: /);
    t.regex(error!.message, reason);
  }
});

test('save is atomic: the file is replaced whole, and no temporary file is left', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lockfile-'));
  const file = join(dir, 'locks');
  await writeFile(file, 'old content');
  await saveLockFile(file, LOCKS);
  t.deepEqual(await loadLockFile(file), LOCKS);
  t.deepEqual(await readdir(dir), ['locks']);
  const many: SavedLock[] = Array.from({ length: 20_000 }, (_, i) => ({ ...LOCKS[0]!, key: `key${i}` }));
  await saveLockFile(file, many);
  t.is((await loadLockFile(file))?.length, 20_000);
  t.true((await readFile(file, 'utf8')).endsWith('\n'));
});

test('a missing lock file is no error; an unreadable one is, naming it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lockfile-'));
  t.is(await loadLockFile(join(dir, 'absent')), undefined);
  const error = await t.throwsAsync(loadLockFile(dir));
  t.true(error!.message.includes(dir));
});
