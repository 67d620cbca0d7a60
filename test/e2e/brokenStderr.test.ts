import test from 'ava';
import { startServer } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// A server whose stderr reader goes away (a pipeline's reader exits, a supervisor dies) gets EPIPE
// on every log line. That must cost the log, not the service: before, the write error became an
// uncaught exception whose fatal event was written to the same broken pipe, over and over, the
// process never exiting and its memory growing by the gigabyte.

test('a server whose stderr is closed keeps serving, and still shuts down cleanly on SIGTERM', async (t) => {
  // -d logs every command, so each request below writes to the broken stream.
  const server = await startServer(t, { args: ['-d'] });
  server.child.stderr?.destroy();
  const client = await server.accepted();
  for (let i = 0; i < 50; i++) t.is(await ask.request(client, 'k', String(i), 'alice', { ttl: 0, ttw: 0 }), 1);
  t.is(await ask.findOwner(client, 'k', '49'), 'alice');
  server.signal('SIGTERM');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
});
