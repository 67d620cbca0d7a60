import type { Logger } from '../runtime/Logger.js';
import { StartupError } from '../server/Daemon.js';
import { METRICS_PATH, startMetricsEndpoint } from './metricsEndpoint.js';
import { ServerMetrics } from './ServerMetrics.js';

/** Default bind address of the metrics endpoint: this host only, until the operator opens it up. */
export const DEFAULT_METRICS_LISTEN = '127.0.0.1';

/**
 * Starts the metrics endpoint for `lockserver --metrics-port`. Runs before the daemon starts, so
 * a taken port fails the start cleanly; attach() the daemon once it runs.
 */
export async function serveMetrics(port: number, host: string, logger: Logger): Promise<ServerMetrics> {
  const metrics = new ServerMetrics();
  let address;
  try {
    ({ address } = await startMetricsEndpoint(metrics.registry, port, host));
  } catch (error) {
    throw new StartupError(`cannot serve metrics on ${host}:${port}: ${(error as Error).message}`);
  }
  logger.event('metrics-started', { address: address.address, port: address.port, path: METRICS_PATH });
  return metrics;
}
