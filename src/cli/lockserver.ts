#!/usr/bin/env node
import { join, resolve } from 'node:path';
import { Command, CommanderError } from 'commander';
import { systemClock } from '../locks/Clock.js';
import { DEFAULT_MAX_ENTRIES } from '../locks/LockTable.js';
import { DEFAULT_PORT } from '../defaultPort.js';
import { DEFAULT_METRICS_LISTEN, serveMetrics } from '../metrics/serveMetrics.js';
import { PACKAGE_ROOT } from '../packageRoot.js';
import { PACKAGE_VERSION } from '../packageVersion.js';
import { Daemon } from '../server/Daemon.js';
import { streamLogger } from '../server/Logger.js';
import { integerIn, parseFileName, parseListenAddress, parsePort } from './options.js';

export const DEFAULT_MAX_CONNECTIONS = 4096;
export const DEFAULT_FRAME_TIMEOUT_SECONDS = 10;
export const DEFAULT_LOCK_FILE = 'lockserver.locks';
export const DEFAULT_STAT_FILE = 'lockserver.stats';
/** Exit code for a bad command line, as many Unix tools use. */
const EXIT_USAGE = 2;
/** Exit code for a failed start (bad file, port taken). */
const EXIT_STARTUP = 1;

const program = new Command()
  .name('lockserver')
  .description('LockServer 0.9b compatible TCP lock daemon')
  .version(PACKAGE_VERSION, '-V, --version')
  .option('-d, --debug', 'amusing, informative messages on stderr about each connection and command', false)
  .option('-p, --port <n>', 'TCP port to listen on (0 = any free port)', parsePort, DEFAULT_PORT)
  .option('--listen <addr>', 'address to bind (default: every interface)', parseListenAddress)
  .option('--hosts <file>', 'allowlist file', parseFileName, join(PACKAGE_ROOT, 'hosts'))
  .option('--lock-file <file>', 'where locks are saved and reloaded', parseFileName, DEFAULT_LOCK_FILE)
  .option('--stat-file <file>', 'where SIGUSR1 writes the statistics', parseFileName, DEFAULT_STAT_FILE)
  .option('--max-connections <n>', 'above this, new connections are refused as too busy', integerIn(1, 1_000_000), DEFAULT_MAX_CONNECTIONS)
  .option('--frame-timeout <seconds>', 'close a connection whose request stays incomplete this long', integerIn(1, 86_400), DEFAULT_FRAME_TIMEOUT_SECONDS)
  .option('--idle-timeout <seconds>', 'close a connection with no traffic this long (0 = never)', integerIn(0, 86_400 * 365), 0)
  .option('--max-locks <n>', 'most entries (owners + waiters) held; beyond, requests get position 0', integerIn(1, 100_000_000), DEFAULT_MAX_ENTRIES)
  .option('--metrics-port <n>', 'serve Prometheus metrics over HTTP on this port (default: off)', parsePort)
  .option('--metrics-listen <addr>', 'address the metrics endpoint binds', parseListenAddress, DEFAULT_METRICS_LISTEN)
  .exitOverride()
  .configureOutput({ outputError: (text, write) => write(text.replace(/\n+$/, '') + '\n') });

interface CliOptions {
  debug: boolean;
  port: number;
  listen?: string;
  hosts: string;
  lockFile: string;
  statFile: string;
  maxConnections: number;
  frameTimeout: number;
  idleTimeout: number;
  maxLocks: number;
  metricsPort?: number;
  metricsListen: string;
}

function parseCommandLine(): CliOptions {
  try {
    program.parse(process.argv);
  } catch (error) {
    // commander exits 1 on usage errors; scripts expect 2. Help and --version exit 0.
    if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : EXIT_USAGE);
    throw error;
  }
  return program.opts<CliOptions>();
}

async function main(): Promise<void> {
  const options = parseCommandLine();
  const logger = streamLogger((line) => process.stderr.write(line), options.debug);
  try {
    const metrics =
      options.metricsPort === undefined ? undefined : await serveMetrics(options.metricsPort, options.metricsListen, logger);
    const daemon = await Daemon.start(
      {
        port: options.port,
        listen: options.listen,
        hostsFile: resolve(options.hosts),
        lockFile: resolve(options.lockFile),
        statFile: resolve(options.statFile),
        maxConnections: options.maxConnections,
        frameTimeoutSeconds: options.frameTimeout,
        idleTimeoutSeconds: options.idleTimeout,
        maxLocks: options.maxLocks,
      },
      { clock: systemClock, logger, exit: (code) => process.exit(code), handleSignals: true, onExpired: metrics?.countExpired },
    );
    metrics?.attach(daemon);
    logger.debug?.(`ready to hand out locks on port ${daemon.address.port}; may all your waits be short`);
  } catch (error) {
    process.stderr.write(`lockserver: ${(error as Error).message}\n`);
    process.exit(EXIT_STARTUP);
  }
}

void main();
