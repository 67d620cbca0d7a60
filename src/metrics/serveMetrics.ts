import type { Clock } from '../runtime/Clock.js';
import type { Logger } from '../runtime/Logger.js';
import { StartupError } from '../server/Daemon.js';
import { METRICS_PATH, startMetricsEndpoint } from './metricsEndpoint.js';
import { Readiness, type ReadinessOptions } from './Readiness.js';
import { ServerMetrics } from './ServerMetrics.js';

/** Default bind address of the metrics endpoint: this host only, until the operator opens it up. */
export const DEFAULT_METRICS_LISTEN = '127.0.0.1';

/** What the metrics listener reads: attach the daemon (and the cluster core) to both once it runs. */
export interface ServedMetrics {
  readonly metrics: ServerMetrics;
  readonly readiness: Readiness;
}

/**
 * Starts the metrics endpoint (with `/livez` and `/readyz`) for `lockserver --metrics-port`. Runs
 * before the daemon starts, so a taken port fails the start cleanly and a starting node already
 * answers its probes (not ready).
 */
export async function serveMetrics(port: number, host: string, logger: Logger, clock: Clock, readinessOptions: ReadinessOptions): Promise<ServedMetrics> {
  const metrics = new ServerMetrics({ clusterMode: readinessOptions.clusterMode });
  const readiness = new Readiness(clock, readinessOptions);
  let address;
  try {
    ({ address } = await startMetricsEndpoint(metrics.registry, port, host, readiness));
  } catch (error) {
    throw new StartupError(`cannot serve metrics on ${host}:${port}: ${(error as Error).message}`);
  }
  logger.event('metrics-started', { address: address.address, port: address.port, path: METRICS_PATH });
  return { metrics, readiness };
}
