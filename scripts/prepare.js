// npm's `prepare` script: builds dist/ from a clean slate (what `npm run clean && npm run build` do).
//
// npm runs `prepare` after `npm install` and `npm ci` in a checkout, before `npm pack` and `npm
// publish`, and whenever it installs this package as a link. `npx lockctl` (or `npx lockserver`)
// in a checkout does the last: npm exec finds the command among the bins of the package in the
// current directory and installs that directory into npx's cache as a link, the first time, with
// npm_command set to "exec". A clean build there deleted dist/ under a running server and took
// 10-45 s, so under npm exec a build that is there is used as it is (`npm run build` after
// editing the sources); without one, it is built. The build makes the commands executable (binModes.js).
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { makeBinsExecutable } from './binModes.js';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const bins = ['lockserver.js', 'lockctl.js'].map((file) => join(root, 'dist', 'src', 'cli', file));

if (process.env.npm_command === 'exec' && bins.every((file) => existsSync(file))) process.exit(0);

rmSync(join(root, 'dist'), { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const build = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { stdio: 'inherit' });
if (build.status === 0) makeBinsExecutable(root);
process.exit(build.status ?? 1);
