import test from 'ava';
import { execFile } from 'node:child_process';
import { mkdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../src/packageRoot.js';
import { tempDir } from '../helpers/serverProcess.js';

// The build leaves the package's commands executable (scripts/binModes.js): `npx lockctl` in a
// checkout runs dist/src/cli/lockctl.js by its path, and a clean build's files come without the bit.

const run = promisify(execFile);
const BIN_MODES = join(PACKAGE_ROOT, 'scripts', 'binModes.js');
const executableByAll = async (path: string): Promise<boolean> => ((await stat(path)).mode & 0o111) === 0o111;

test("the package's own commands are executable after the build that runs the tests", async (t) => {
  for (const file of ['lockserver.js', 'lockctl.js']) t.true(await executableByAll(join(PACKAGE_ROOT, 'dist', 'src', 'cli', file)), file);
});

test('every bin a package.json names gets the execute bit; other files keep their modes', async (t) => {
  const root = await tempDir(t);
  await mkdir(join(root, 'dist'));
  await writeFile(join(root, 'package.json'), JSON.stringify({ bin: { a: 'dist/a.js', b: './dist/b.js' } }));
  for (const file of ['a.js', 'b.js', 'other.js']) await writeFile(join(root, 'dist', file), '', { mode: 0o644 });
  await run(process.execPath, [BIN_MODES, root]);
  t.is((await stat(join(root, 'dist', 'a.js'))).mode & 0o777, 0o755);
  t.is((await stat(join(root, 'dist', 'b.js'))).mode & 0o777, 0o755);
  t.is((await stat(join(root, 'dist', 'other.js'))).mode & 0o777, 0o644);
});

test('a bin that is not there fails the build, naming the manifest and the file', async (t) => {
  const root = await tempDir(t);
  await writeFile(join(root, 'package.json'), JSON.stringify({ bin: 'dist/missing.js' }));
  const error = await t.throwsAsync(run(process.execPath, [BIN_MODES, root]));
  t.regex((error as Error & { stderr: string }).stderr, /package\.json: bin dist\/missing\.js is not there \(ENOENT\); build first/);
});
