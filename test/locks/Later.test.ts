import test from 'ava';
import { Later, type LaterListener } from '../../src/locks/Later.js';

/** A listener that writes down what it heard, with the key. */
function recorder(): { heard: string[]; listener: LaterListener<number, string> } {
  const heard: string[] = [];
  return {
    heard,
    listener: { resolved: (key, value) => heard.push(`${key}:${value}`), rejected: (key, error) => heard.push(`${key}!${(error as Error).message}`) },
  };
}

test('the listener hears the outcome at once, in the turn it settles, with its key; later settlements change nothing', (t) => {
  const answer = new Later<number>();
  const { heard, listener } = recorder();
  answer.listen(listener, 'a');
  t.deepEqual(heard, []);
  answer.resolve(7);
  t.deepEqual(heard, ['a:7'], 'synchronously');
  answer.resolve(8);
  answer.reject(new Error('late'));
  t.deepEqual(heard, ['a:7']);
});

test('a listener that comes after the outcome hears it as it listens', (t) => {
  const resolved = new Later<number>();
  const rejected = new Later<number>();
  resolved.resolve(1);
  rejected.reject(new Error('refused'));
  rejected.resolve(2); // too late: it stays rejected
  const { heard, listener } = recorder();
  resolved.listen(listener, 'r');
  rejected.listen(listener, 'x');
  t.deepEqual(heard, ['r:1', 'x!refused']);
});

test('one listener only: a second is a programming error', (t) => {
  const answer = new Later<number>();
  answer.listen(recorder().listener, 'a');
  t.throws(() => answer.listen(recorder().listener, 'b'), { message: /one listener/ });
});

test('awaiting works as for a promise, twice over too; a rejection nobody listens to is no unhandled rejection', async (t) => {
  const answer = new Later<number>();
  setImmediate(() => answer.resolve(5));
  t.is(await answer, 5);
  t.is(await answer.then((v) => v * 2), 10);
  const failed = new Later<number>();
  failed.reject(new Error('no'));
  await t.throwsAsync(async () => await failed, { message: 'no' });
  new Later<number>().reject(new Error('ignored')); // would fail the test run if it surfaced
  await new Promise((resolve) => setImmediate(resolve));
  t.pass();
});
