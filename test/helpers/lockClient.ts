import type { ExecutionContext } from 'ava';
import { LockClient, type LockClientOptions } from '../../src/client/LockClient.js';

/** A LockClient on 127.0.0.1:port, destroyed when the test ends if the test did not close it. */
export async function connectClient(t: ExecutionContext, port: number, options: Omit<LockClientOptions, 'port'> = {}): Promise<LockClient> {
  const client = await LockClient.connect({ host: '127.0.0.1', ...options, port });
  t.teardown(() => client.destroy());
  return client;
}
