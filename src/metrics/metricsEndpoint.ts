import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export const METRICS_PATH = '/metrics';
/** The process serves its event loop: answering at all is the check. */
export const LIVENESS_PATH = '/livez';
/** The node should be sent clients (see Readiness). */
export const READINESS_PATH = '/readyz';
/** A scraper needs one or two connections; anything more is a mistake or an attack. */
const MAX_CONNECTIONS = 16;
const REQUEST_LIMIT_MS = 10_000;
/** Probes must see the state of now, never a proxy's copy. */
const HEALTH_HEADERS = { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' };

export interface MetricsEndpoint {
  readonly address: AddressInfo;
  close(): Promise<void>;
}

/** What `/readyz` asks: why the node is not ready, one reason per failing check (none: ready). */
export interface ReadinessCheck {
  problems(): readonly string[];
}

type Route = (request: IncomingMessage, response: ServerResponse) => void;

/**
 * Serves `GET /metrics` in the Prometheus text format, and the health probes in plain text (200
 * `ok`, or 503 with one reason per line): `/livez`, and `/readyz` when given a readiness check;
 * every other path is 404.
 */
export async function startMetricsEndpoint(registry: Registry, port: number, host: string, readiness?: ReadinessCheck): Promise<MetricsEndpoint> {
  const routes = new Map<string, Route>([
    [
      METRICS_PATH,
      (request, response) => {
        registry.metrics().then(
          (text) => response.writeHead(200, { 'content-type': registry.contentType }).end(request.method === 'HEAD' ? undefined : text),
          (error: unknown) => response.writeHead(500, { 'content-type': 'text/plain' }).end(`${error instanceof Error ? error.message : String(error)}\n`),
        );
      },
    ],
    [LIVENESS_PATH, (request, response) => answerHealth(request, response, [])],
  ]);
  if (readiness !== undefined) routes.set(READINESS_PATH, (request, response) => answerHealth(request, response, readiness.problems()));
  const server: Server = createServer({ requestTimeout: REQUEST_LIMIT_MS, headersTimeout: REQUEST_LIMIT_MS }, (request, response) => {
    const route = routes.get((request.url ?? '').split('?')[0]!);
    if (route === undefined) {
      response.writeHead(404, { 'content-type': 'text/plain' }).end(`not found; metrics are at ${METRICS_PATH}\n`);
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    route(request, response);
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

/** 200 `ok`, or 503 with each problem on a line of its own. */
function answerHealth(request: IncomingMessage, response: ServerResponse, problems: readonly string[]): void {
  const body = problems.length === 0 ? 'ok\n' : problems.map((problem) => `${problem}\n`).join('');
  response
    .writeHead(problems.length === 0 ? 200 : 503, { ...HEALTH_HEADERS, 'content-length': Buffer.byteLength(body) })
    .end(request.method === 'HEAD' ? undefined : body);
}
