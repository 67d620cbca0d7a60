// Makes the package's commands (package.json "bin") executable: `node scripts/binModes.js [ROOT]`.
//
// tsc writes new files without the execute bit. npm sets it on a package's bins when it links or
// installs the package, but `npx lockctl` in a checkout links the checkout into npx's cache once:
// after a later clean build (`npm install`, `npm ci` and `npm pack` run `prepare`, which deletes
// dist/), npx ran `dist/src/cli/lockctl.js` without the bit ("Permission denied", exit 127). The
// build sets the bits itself, so that whatever built dist/ last, its commands run.
import { chmodSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

/** chmod a+x of every bin of the package at `root`; throws naming the file that is missing. */
export function makeBinsExecutable(root) {
  const manifest = join(root, 'package.json');
  const { bin } = JSON.parse(readFileSync(manifest, 'utf8'));
  const files = typeof bin === 'string' ? [bin] : Object.values(bin ?? {});
  for (const file of files) {
    const path = join(root, file);
    let mode;
    try {
      mode = statSync(path).mode;
    } catch (error) {
      throw new Error(`${manifest}: bin ${file} is not there (${error.code ?? error.message}); build first`, { cause: error });
    }
    chmodSync(path, mode | 0o111);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    makeBinsExecutable(process.argv[2] ?? dirname(dirname(fileURLToPath(import.meta.url))));
  } catch (error) {
    process.stderr.write(`binModes: ${error.message}\n`);
    process.exit(1);
  }
}
