import test, { type ExecutionContext } from 'ava';
import { Registry } from 'prom-client';
import { startMetricsEndpoint } from '../../src/metrics/metricsEndpoint.js';

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

/** The endpoint on a free loopback port, answering /readyz with whatever `problems` holds. */
async function endpoint(t: ExecutionContext, problems: string[] = []): Promise<(path: string, method?: string) => Promise<Answer>> {
  const served = await startMetricsEndpoint(new Registry(), 0, '127.0.0.1', { problems: () => problems });
  t.teardown(() => served.close());
  return async (path, method = 'GET') => {
    const response = await fetch(`http://127.0.0.1:${served.address.port}${path}`, { method, signal: AbortSignal.timeout(10_000) });
    return { status: response.status, headers: response.headers, body: await response.text() };
  };
}

test('/livez and /readyz answer 200 ok in plain text, never cached', async (t) => {
  const ask = await endpoint(t);
  for (const path of ['/livez', '/readyz', '/readyz?verbose']) {
    const answer = await ask(path);
    t.is(answer.status, 200, path);
    t.is(answer.body, 'ok\n');
    t.is(answer.headers.get('content-type'), 'text/plain; charset=utf-8');
    t.is(answer.headers.get('cache-control'), 'no-store');
  }
});

test('/readyz answers 503 with one line per problem; /livez stays 200', async (t) => {
  const ask = await endpoint(t, ['draining', 'etcd unreachable']);
  t.like(await ask('/readyz'), { status: 503, body: 'draining\netcd unreachable\n' });
  t.is((await ask('/readyz')).headers.get('cache-control'), 'no-store');
  t.like(await ask('/livez'), { status: 200, body: 'ok\n' });
});

test('HEAD gives the status and length without a body; other methods are 405', async (t) => {
  const ask = await endpoint(t, ['not listening']);
  const head = await ask('/readyz', 'HEAD');
  t.like(head, { status: 503, body: '' });
  t.is(head.headers.get('content-length'), String('not listening\n'.length));
  t.like(await ask('/livez', 'HEAD'), { status: 200, body: '' });
  t.is((await ask('/livez', 'POST')).status, 405);
  t.is((await ask('/readyz', 'DELETE')).status, 405);
});

test('other paths are 404 as before; /metrics is served as before', async (t) => {
  const ask = await endpoint(t);
  t.like(await ask('/healthz'), { status: 404, body: 'not found; metrics are at /metrics\n' });
  t.is((await ask('/livez/x')).status, 404);
  const metrics = await ask('/metrics');
  t.is(metrics.status, 200);
  t.regex(metrics.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/);
});

test('without a readiness check, /readyz is not served', async (t) => {
  const served = await startMetricsEndpoint(new Registry(), 0, '127.0.0.1');
  t.teardown(() => served.close());
  const response = await fetch(`http://127.0.0.1:${served.address.port}/readyz`, { signal: AbortSignal.timeout(10_000) });
  t.is(response.status, 404);
  await response.text();
});
