import type { BenchResults } from './results.js';
import { renderCluster } from './report/cluster.js';
import { contentionTable } from './report/contention.js';
import { renderEntryBytes } from './report/entryBytes.js';
import { num } from './report/format.js';
import { renderHandoff } from './report/handoff.js';
import { renderRandomKeys } from './report/random.js';
import { renderHeld, renderThroughput, scaleFacts } from './report/single.js';
import { renderClusterTargets, renderTargets } from './report/targets.js';

/** The whole run as markdown: context, one table per scenario, then the targets. */
export function renderMarkdown(results: BenchResults): string {
  const out: string[] = [];
  const m = results.machine;
  out.push(`### LockServer benchmark, ${results.startedAt.slice(0, 16).replace('T', ' ')} UTC`);
  out.push('');
  out.push(`Machine: ${m.cpus} × ${m.cpuModel}, ${num(m.totalMemoryBytes / 2 ** 30)} GiB RAM, ${m.os}, Node ${m.node}. ${m.note}`);
  const loads = results.loadAverages;
  if (loads.length > 0) {
    out.push(`1-minute load average around the scenarios: ${loads.map((l) => `${l.scenario} ${num(l.before, 2)}→${num(l.after, 2)}`).join(', ')}.`);
  }
  out.push(`Command: \`${results.command}\``);
  const build = results.serverBuild;
  if (build !== undefined) {
    out.push(`Server: ${build.root}${build.commit !== undefined ? ` at ${build.commit}${build.modified === true ? ' with uncommitted changes' : ''}` : ''}.`);
  }
  out.push('');

  if (results.throughput !== undefined || results.ceiling !== undefined || results.redis !== undefined) out.push(...renderThroughput(results));

  if (results.random !== undefined) out.push(...renderRandomKeys(results), '');

  const contention = results.contention;
  if (contention !== undefined) {
    out.push(`**Contention**: ${contention.contenders} clients poll one (key, index) with request (0x02) until they own it, then release.`);
    out.push('');
    out.push(contentionTable(contention));
    out.push('');
  }
  if (results.held !== undefined) out.push(...renderHeld(results));

  const facts = scaleFacts(results);
  if (results.entryBytes !== undefined) out.push(...renderEntryBytes(results.entryBytes));
  if (facts.length > 0) {
    out.push('**Scale: list, fairness, mass expiry, release-all, idle connections**');
    out.push('');
    for (const f of facts) out.push(`- ${f}`);
    out.push('');
  }
  out.push(...renderTargets(results));
  if (results.cluster !== undefined) out.push(...renderCluster(results), ...renderClusterTargets(results));
  if (results.handoff !== undefined) out.push('', ...renderHandoff(results.handoff));
  if (results.errors.length > 0) {
    out.push('', '**Failures**', '');
    for (const e of results.errors) out.push(`- ${e.scenario}: ${e.message.split('\n')[0]}`);
  }
  return out.join('\n') + '\n';
}
