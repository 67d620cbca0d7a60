/**
 * Test-only launcher (never shipped: dist/src holds no trace of it). Starts the compiled Daemon
 * the way the CLI does — real clock, real process.exit, handleSignals: true — and, when a line
 * arrives on stdin, throws an error that nothing catches. The production code is untouched: the
 * test sees how the real process handlers deal with a genuine uncaught exception.
 *
 *   node fatalDaemon.js <hostsFile> <lockFile> <statFile>
 */
import { systemClock } from '../../src/runtime/Clock.js';
import { Daemon } from '../../src/server/Daemon.js';
import { streamLogger } from '../../src/runtime/Logger.js';

const [hostsFile, lockFile, statFile] = process.argv.slice(2);
if (hostsFile === undefined || lockFile === undefined || statFile === undefined) {
  process.stderr.write('usage: fatalDaemon.js <hostsFile> <lockFile> <statFile>\n');
  process.exit(2);
}

const logger = streamLogger((line) => process.stderr.write(line), false);
await Daemon.start(
  {
    port: 0,
    listen: '127.0.0.1',
    hostsFile,
    lockFile,
    statFile,
    maxConnections: 100,
    frameTimeoutSeconds: 10,
    maxLocks: 1_000_000,
  },
  { clock: systemClock, logger, exit: (code) => process.exit(code), handleSignals: true },
);

process.stdin.setEncoding('utf8');
process.stdin.once('data', () => {
  throw new Error('an impossible state (thrown by the test launcher)');
});
