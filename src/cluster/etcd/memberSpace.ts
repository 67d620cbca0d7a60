import type { MemberSpace } from '../ReplicatedLog.js';
import { deadline, within } from './calls.js';
import type { Endpoint } from './EndpointPool.js';

/**
 * The member's status (etcd answers it itself, no Raft round), or undefined if it did not answer
 * within `timeoutMs`. etcd 3.4 lists raised alarms in the status's `errors` ("memberID:… alarm:NOSPACE").
 */
export async function memberSpace(endpoint: Endpoint, timeoutMs: number): Promise<MemberSpace | undefined> {
  try {
    const status = await within(timeoutMs, 'status', endpoint.client.maintenance.status(deadline(timeoutMs)));
    const dbBytes = Number(status.dbSize);
    // dbSizeInUse is 0 or absent before etcd 3.4: counted as all of it.
    const inUse = Number(status.dbSizeInUse ?? 0);
    return {
      url: endpoint.url,
      dbBytes,
      dbBytesInUse: inUse > 0 ? inUse : dbBytes,
      noSpace: (status.errors ?? []).some((e) => /NOSPACE/i.test(e)),
    };
  } catch {
    return undefined;
  }
}

/** Defragments the member at `url` (it serves nothing meanwhile); rejects if it failed or took longer than `timeoutMs`. */
export async function defragmentMember(endpoints: readonly Endpoint[], url: string, timeoutMs: number): Promise<void> {
  const endpoint = endpoints.find((e) => e.url === url);
  if (endpoint === undefined) throw new Error(`no etcd endpoint ${url}`);
  await within(timeoutMs, 'defragment', endpoint.client.maintenance.defragment(deadline(timeoutMs)));
}
