import { mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { FileFormatError } from '../../src/files/FileFormatError.js';
import { decodeField, encodeField, formatLockFile, loadLockFile, parseLockFile, parseLockFileVersioned, saveLockFile } from '../../src/files/lockFile.js';
import type { SavedHold, SavedLock } from '../../src/locks/LockService.js';

const every = String.fromCharCode(...Array.from({ length: 255 }, (_, i) => i));

const LOCKS: SavedLock[] = [
  { key: 'users', index: '42', owner: 'alice', priority: 10, ttl: 30, ttw: 60, isOwner: true, token: 1_790_000_000_000_041, remainingMs: 29500 },
  { key: 'users', index: '42', owner: 'bob smith', priority: 0, ttl: 30, ttw: 0, isOwner: false, token: 0, remainingMs: null },
  { key: '', index: '-', owner: '%41', priority: 255, ttl: 65535, ttw: 65535, isOwner: true, token: 1, remainingMs: 0 },
  { key: every, index: '\x00', owner: '\xff\xfe', priority: 1, ttl: 1, ttw: 1, isOwner: true, token: Number.MAX_SAFE_INTEGER - 1, remainingMs: 1 },
];
/** The token high-water the LOCKS were saved with: above every token they hold. */
const HIGHEST = Number.MAX_SAFE_INTEGER;

test('fields round-trip every byte; the text stays printable ASCII with no blanks', (t) => {
  for (const value of ['', '-', '--', '%', '%2D', 'a b', 'a#b', every, '\xc3\xa9']) {
    const field = encodeField(value);
    t.regex(field, /^[\x21-\x7e]+$/);
    t.is(decodeField(field), value);
  }
  t.is(encodeField('users'), 'users');
  t.is(encodeField('a b%'), 'a%20b%25');
});

test('format then parse gives back every entry in order, with its token, and the token high-water', (t) => {
  const text = [...formatLockFile(LOCKS, HIGHEST, new Date(0))].join('');
  t.true(text.startsWith('lockserver-locks 4\nhighest-token 9007199254740991\n'));
  t.true(text.includes('\nusers 42 alice 10 30 60 owner 29500 1790000000000041\n'));
  t.true(text.includes('\nusers 42 bob%20smith 0 30 0 waiter never 0\n'));
  t.true(text.endsWith('\nend 4\n'));
  t.deepEqual(parseLockFileVersioned(text, 'x'), { version: 4, locks: LOCKS, holds: [], highestToken: HIGHEST, verified: true });
});

test('an empty table is a valid file with the header, its high-water and "end 0"', (t) => {
  const text = [...formatLockFile([], 12)].join('');
  t.true(text.endsWith('\nend 0\n'));
  t.deepEqual(parseLockFileVersioned(text, 'x'), { version: 4, locks: [], holds: [], highestToken: 12, verified: true });
});

test('locks held back by a lock-delay round-trip with the time their delay had left, each at its place among the entries', (t) => {
  const holds: SavedHold[] = [
    // Held back with nobody waiting, before every entry; then one before bob's queue; then one at the end.
    { key: 'jobs', index: '', remainingMs: 28_537, entriesBefore: 0 },
    { key: 'users', index: '7', remainingMs: 1, entriesBefore: 2 },
    { key: every, index: '\x00 #', remainingMs: 3_600_000, entriesBefore: 4 },
  ];
  const waiter: SavedLock = { key: 'users', index: '7', owner: 'bob', priority: 0, ttl: 30, ttw: 60, isOwner: false, token: 0, remainingMs: 59_000 };
  const locks = [LOCKS[0]!, LOCKS[1]!, waiter, LOCKS[2]!];
  const text = [...formatLockFile(locks, HIGHEST, new Date(0), holds)].join('');
  t.true(text.includes('\nheld-back jobs - 28537\nusers 42 alice '), text);
  t.true(text.includes('\nheld-back users 7 1\nusers 7 bob 0 30 60 waiter 59000 0\n'), text);
  t.true(text.endsWith(`\nheld-back ${encodeField(every)} %00%20%23 3600000\nend 4\n`), text);
  t.deepEqual(parseLockFileVersioned(text, 'x'), { version: 4, locks, holds, highestToken: HIGHEST, verified: true });
});

test('a version 3 file (before lock-delays were saved) still loads, with nothing held back; a held-back line is not version 3', (t) => {
  const v3 = 'lockserver-locks 3\nhighest-token 10\nusers 42 alice 10 30 60 owner 29500 9\nusers 42 bob 0 30 60 waiter never 0\nend 2\n';
  const parsed = parseLockFileVersioned(v3, 'x');
  t.like(parsed, { version: 3, highestToken: 10, verified: true, holds: [] });
  t.deepEqual(
    parsed.locks.map((lock) => [lock.owner, lock.token]),
    [
      ['alice', 9],
      ['bob', 0],
    ],
  );
  t.throws(() => parseLockFile('lockserver-locks 3\nhighest-token 10\nheld-back k 1 500\nend 0\n', '/l'), { message: /^\/l:3: expected 9 fields, found 4/ });
});

test('a bad held-back line is refused naming file and line', (t) => {
  const header = 'lockserver-locks 4\nhighest-token 10\n';
  for (const [lines, line, reason] of [
    ['held-back k 1 x\nend 0', 3, /bad remaining time "x"/],
    ['held-back k 1 99999999999\nend 0', 3, /bad remaining time/],
    ['held-back k%G 1 5\nend 0', 3, /bad key field/],
    ['held-back k 1 5\nheld-back k 1 6\nend 0', 4, /held back twice/],
    ['k 1 a 0 0 0 owner never 3\nheld-back k 1 5\nend 1', 4, /held back that has an owner/],
    ['held-back k 1 5\nk 1 a 0 0 0 owner never 3\nend 1', 4, /an owner of a lock held back/],
  ] as const) {
    const error = t.throws(() => parseLockFile(header + lines + '\n', '/l'), { instanceOf: FileFormatError });
    t.is(error?.line, line, lines);
    t.regex(error.message, new RegExp(`^/l:${line}: `));
    t.regex(error.message, reason);
  }
});

test('the high-water read back is at least every token in the file, whatever the highest-token line says', (t) => {
  const text = 'lockserver-locks 3\nhighest-token 5\nk 1 a 0 0 0 owner never 9\nk 2 a 0 0 0 owner never 7\nend 2\n';
  t.is(parseLockFileVersioned(text, 'x').highestToken, 9);
});

test('a version 2 file still loads: tokens 0, high-water 0, checked by its end line', (t) => {
  const v2 =
    'lockserver-locks 2\n# key index owner priority ttl ttw role remaining\nusers 42 alice 10 30 60 owner 29500\nusers 42 bob 0 30 60 waiter never\nend 2\n';
  const parsed = parseLockFileVersioned(v2, 'x');
  t.like(parsed, { version: 2, highestToken: 0, verified: true });
  t.deepEqual(parsed.locks, [
    { key: 'users', index: '42', owner: 'alice', priority: 10, ttl: 30, ttw: 60, isOwner: true, token: 0, remainingMs: 29500 },
    { key: 'users', index: '42', owner: 'bob', priority: 0, ttl: 30, ttw: 60, isOwner: false, token: 0, remainingMs: null },
  ]);
  // Its entries have eight fields: a token column, or a high-water line, is not version 2.
  t.throws(() => parseLockFile('lockserver-locks 2\nusers 42 alice 10 30 60 owner 29500 7\nend 1\n', '/l'), { message: /^\/l:2: expected 8 fields, found 9/ });
  t.throws(() => parseLockFile('lockserver-locks 2\nhighest-token 7\nend 0\n', '/l'), { message: /^\/l:2: expected 8 fields, found 2/ });
});

test('a file with no header (empty, or only comments and blanks) is refused at line 1', (t) => {
  for (const text of ['', '\n\n', '# saved 2026-11-21\n# key index owner\n', '   \n# x\n']) {
    const error = t.throws(() => parseLockFile(text, '/l'), { instanceOf: FileFormatError });
    t.is(error?.line, 1, JSON.stringify(text));
    t.regex(error.message, /^\/l:1: .*empty or holds only comments/);
  }
});

test('a lock file cut short, even exactly at a line boundary, is refused naming its last line', (t) => {
  const whole = [...formatLockFile(LOCKS, HIGHEST, new Date(0))].join('');
  const lines = whole.split('\n');
  // Drop the end line, then also entry lines, keeping every cut at a line boundary. The error
  // names the last meaningful line: the high-water line when only it and the three comment lines
  // are left after the header, the header when only the header is.
  for (let keep = lines.length - 2; keep >= 1; keep--) {
    const cut = lines.slice(0, keep).join('\n') + '\n';
    const error = t.throws(() => parseLockFile(cut, '/l'), { instanceOf: FileFormatError });
    t.is(error?.line, keep === 1 ? 1 : keep <= 5 ? 2 : keep, cut);
    t.regex(error.message, /cut short/);
  }
});

test('an end line whose count does not match the entries is refused naming it', (t) => {
  const header = 'lockserver-locks 2\n';
  const entries = 'k 1 a 0 0 0 owner never\nk 1 b 0 0 0 waiter never\n';
  for (const [end, reason] of [
    ['end 3', /says 3 entries, but the file holds 2/],
    ['end 1', /says 1 entries, but the file holds 2/],
    ['end x', /bad entry count "x"/],
  ] as const) {
    const error = t.throws(() => parseLockFile(header + entries + end + '\n', '/l'), { instanceOf: FileFormatError });
    t.is(error?.line, 4);
    t.regex(error.message, reason);
  }
  const after = t.throws(() => parseLockFile(header + entries + 'end 2\nk 2 c 0 0 0 owner never\n', '/l'), { instanceOf: FileFormatError });
  t.is(after?.line, 5);
  t.regex(after.message, /nothing may follow the end line/);
});

test('a version 1 file (no end line) still loads, marked unverified; with an end line it is checked', (t) => {
  const v1 = 'lockserver-locks 1\n# key index owner priority ttl ttw role remaining\nusers 42 alice 10 30 60 owner never\n';
  const parsed = parseLockFileVersioned(v1, 'x');
  t.is(parsed.version, 1);
  t.false(parsed.verified);
  t.deepEqual(
    parsed.locks.map((lock) => lock.owner),
    ['alice'],
  );
  t.true(parseLockFileVersioned(v1 + 'end 1\n', 'x').verified);
  t.throws(() => parseLockFile(v1 + 'end 2\n', 'x'), { message: /says 2 entries/ });
  t.deepEqual(
    parsed.locks.map((lock) => lock.token),
    [0],
  );
  t.is(parsed.highestToken, 0);
  t.throws(() => parseLockFile('lockserver-locks 5\nend 0\n', 'x'), { message: /x:1: expected the header/ });
});

/** Version 3 files whose token or high-water is bad, with the line that says so. */
function badTokenLines(): Array<[string, number, RegExp]> {
  const header = 'lockserver-locks 3\nhighest-token 10\n';
  return [
    [header + 'k i a 1 1 1 owner 1 x\n', 3, /bad token "x"/],
    [header + 'k i a 1 1 1 owner 1 -1\n', 3, /bad token "-1"/],
    [header + 'k i a 1 1 1 owner 1 1.5\n', 3, /bad token "1.5"/],
    [header + 'k i a 1 1 1 owner 1 9007199254740992\n', 3, /bad token "9007199254740992": .*below 2\^53/],
    [header + 'k i a 1 1 1 owner 1 99999999999999999\n', 3, /bad token/],
    [header + 'k i a 1 1 1 owner 1\n', 3, /9 fields, found 8/],
    [header + '# c\nk i a 1 1 1 owner 1 4\nk i b 1 1 1 waiter 1 5\n', 5, /a waiter holds no token/],
    ['lockserver-locks 3\nhighest-token -3\nend 0\n', 2, /bad highest token "-3"/],
    ['lockserver-locks 3\nhighest-token 9007199254740992\nend 0\n', 2, /bad highest token/],
    ['lockserver-locks 3\n# no high-water\nk i a 1 1 1 owner 1 4\nend 1\n', 3, /expected the "highest-token N" line after the header/],
    ['lockserver-locks 3\nend 0\n', 2, /expected the "highest-token N" line/],
  ];
}

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
    ...badTokenLines(),
  ];
  for (const [text, line, reason] of cases) {
    const error = t.throws(() => parseLockFile(text, '/var/lib/lockserver.locks'), { instanceOf: FileFormatError });
    t.is(error?.line, line, text);
    t.regex(error.message, /^\/var\/lib\/lockserver\.locks:\d+: /);
    t.regex(error.message, reason);
  }
});

test('save is atomic: the file is replaced whole, and no temporary file is left', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lockfile-'));
  const file = join(dir, 'locks');
  await writeFile(file, 'old content');
  await saveLockFile(file, LOCKS, HIGHEST);
  t.deepEqual(await loadLockFile(file), LOCKS);
  t.deepEqual(await readdir(dir), ['locks']);
  const many: SavedLock[] = Array.from({ length: 20_000 }, (_, i) => ({ ...LOCKS[0]!, key: `key${i}` }));
  await saveLockFile(file, many, HIGHEST);
  t.is((await loadLockFile(file))?.length, 20_000);
  t.true((await readFile(file, 'utf8')).endsWith('\n'));
});

test('a missing lock file is no error; an unreadable one is, naming it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lockfile-'));
  t.is(await loadLockFile(join(dir, 'absent')), undefined);
  const error = await t.throwsAsync(loadLockFile(dir));
  t.true(error.message.includes(dir));
});
