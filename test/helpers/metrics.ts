import { request } from 'node:http';
import { bounded } from './bounded.js';

export interface Scrape {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
}

/** One HTTP request to the metrics endpoint on 127.0.0.1 (bounded). */
export function get(port: number, path: string, method = 'GET'): Promise<Scrape> {
  const response = new Promise<Scrape>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (text: string) => (body += text));
      res.on('end', () => resolve({ status: res.statusCode!, contentType: String(res.headers['content-type']), body }));
    });
    req.on('error', reject);
    req.end();
  });
  return bounded(response, 10_000, `GET ${path}`);
}

/** The value of one sample line, e.g. `lockserver_commands_total{command="request"}`. */
export function sample(body: string, series: string): number | undefined {
  const line = body.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Appends a sequencer sent carrying more than one node's batch (its batches-per-append histogram: all but the `le="1"` bucket). */
export function bundlesSent(body: string): number {
  return (
    (sample(body, 'lockserver_cluster_sequencer_append_batches_count') ?? 0) - (sample(body, 'lockserver_cluster_sequencer_append_batches_bucket{le="1"}') ?? 0)
  );
}
