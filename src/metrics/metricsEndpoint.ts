import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export const METRICS_PATH = '/metrics';
/** A scraper needs one or two connections; anything more is a mistake or an attack. */
const MAX_CONNECTIONS = 16;
const REQUEST_LIMIT_MS = 10_000;

export interface MetricsEndpoint {
  readonly address: AddressInfo;
  close(): Promise<void>;
}

/** Serves `GET /metrics` in the Prometheus text format; every other path is 404. */
export async function startMetricsEndpoint(registry: Registry, port: number, host: string): Promise<MetricsEndpoint> {
  const server: Server = createServer({ requestTimeout: REQUEST_LIMIT_MS, headersTimeout: REQUEST_LIMIT_MS }, (request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== METRICS_PATH) {
      response.writeHead(404, { 'content-type': 'text/plain' }).end(`not found; metrics are at ${METRICS_PATH}\n`);
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { 'content-type': registry.contentType }).end(request.method === 'HEAD' ? undefined : text),
      (error: Error) => response.writeHead(500, { 'content-type': 'text/plain' }).end(`${error.message}\n`),
    );
  });
  server.maxConnections = MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    address: server.address() as AddressInfo,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
