import test from 'ava';
import { startServer } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

const entry = (key: string, owner: string): [string, string, string] => [key, '1', owner];

test('-d tells stderr about each connection and command; without it, commands leave no trace', async (t) => {
  for (const debug of [true, false]) {
    const server = await startServer(t, { args: debug ? ['-d'] : [] });
    const client = await server.accepted();
    t.is(await ask.request(client, ...entry('users', 'alice')), 1);
    // Log lines travel in order: once this event is seen, every earlier line has arrived.
    const written = server.nextEvent('stats-written');
    server.signal('SIGUSR1');
    await written;
    const chatter = server.lines.filter((line) => line.startsWith('lockserver: '));
    if (debug) {
      t.true(
        chatter.some((line) => line.includes('is in')),
        'the connection',
      );
      t.true(
        chatter.some((line) => line.includes('asks request key="users" index="1" owner="alice"')),
        'the command',
      );
    } else {
      t.deepEqual(chatter, []);
    }
  }
});

test('--max-locks: a request for one entry more gets position 0; renewals still work', async (t) => {
  const server = await startServer(t, { args: ['--max-locks', '2'] });
  const client = await server.accepted();
  t.is(await ask.request(client, ...entry('a', 'x')), 1);
  t.is(await ask.request(client, ...entry('a', 'y')), 2);
  t.is(await ask.request(client, ...entry('b', 'z')), 0);
  t.is(await ask.request(client, ...entry('a', 'y')), 2);
});
