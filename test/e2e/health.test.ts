import test from 'ava';
import { startServer, type ServerProcess } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// /livez and /readyz on the metrics listener of a single node, through a drain (SIGSYS).

interface Probe {
  readonly status: number;
  readonly contentType: string | null;
  readonly cacheControl: string | null;
  readonly body: string;
}

async function startWithMetrics(
  t: Parameters<typeof startServer>[0],
): Promise<{ server: ServerProcess; probe: (path: string, method?: string) => Promise<Probe> }> {
  const server = await startServer(t, { args: ['--metrics-port', '0', '--metrics-listen', '127.0.0.1'] });
  const port = Number((await server.event('metrics-started')).fields.port);
  const probe = async (path: string, method = 'GET'): Promise<Probe> => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { method, signal: AbortSignal.timeout(10_000) });
    return {
      status: response.status,
      contentType: response.headers.get('content-type'),
      cacheControl: response.headers.get('cache-control'),
      body: await response.text(),
    };
  };
  return { server, probe };
}

test('a running node is live and ready: 200 ok, plain text, not cached; HEAD too', async (t) => {
  const { probe } = await startWithMetrics(t);
  for (const path of ['/livez', '/readyz']) {
    t.deepEqual(await probe(path), { status: 200, contentType: 'text/plain; charset=utf-8', cacheControl: 'no-store', body: 'ok\n' }, path);
    t.like(await probe(path, 'HEAD'), { status: 200, body: '' }, `HEAD ${path}`);
  }
  t.is((await probe('/metrics')).status, 200);
  t.is((await probe('/health')).status, 404);
});

test('SIGSYS: /readyz says draining (503) while /livez stays 200; the drain ends as usual', async (t) => {
  const { server, probe } = await startWithMetrics(t);
  const client = await server.accepted();
  t.is(await ask.request(client, 'k', '1', 'alice', { ttl: 0 }), 1);

  const drainStarted = server.nextEvent('drain-started');
  server.signal('SIGSYS');
  await drainStarted;
  t.like(await probe('/readyz'), { status: 503, cacheControl: 'no-store', body: 'draining\n' });
  t.like(await probe('/readyz', 'HEAD'), { status: 503, body: '' });
  t.like(await probe('/livez'), { status: 200, body: 'ok\n' });
  // The node still serves what it holds while draining.
  t.is(await ask.findOwner(client, 'k', '1'), 'alice');

  const shutdown = server.nextEvent('shutdown');
  t.is(await ask.release(client, 'k', '1', 'alice'), 1);
  t.is((await shutdown).fields.reason, 'drained');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
});
