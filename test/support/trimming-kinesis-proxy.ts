/**
 * Retention simulated in front of kinesis-mock (which keeps records for ever): a Kinesis endpoint
 * whose GetRecords answers leave out the records before a trim point, as after the trim horizon
 * passed them. Everything else is forwarded unchanged.
 */
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TrimmingKinesisProxy {
  readonly endpoint: string;
  /** GetRecords leaves out records below this sequence number from now on (null: none). */
  trimBefore(sequenceNumber: string | bigint | null): void;
  close(): Promise<void>;
}

export async function startTrimmingKinesisProxy(target: string): Promise<TrimmingKinesisProxy> {
  const upstream = new URL(target);
  let trimBefore: bigint | null = null;
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const forward = request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers }, (up) => {
        const out: Buffer[] = [];
        up.on('data', (c: Buffer) => out.push(c));
        up.on('end', () => {
          let body = Buffer.concat(out);
          if (trimBefore !== null && String(req.headers['x-amz-target']).endsWith('.GetRecords') && up.statusCode === 200) {
            const parsed = JSON.parse(body.toString()) as { Records?: { SequenceNumber: string }[] };
            parsed.Records = (parsed.Records ?? []).filter((r) => BigInt(r.SequenceNumber) >= trimBefore!);
            body = Buffer.from(JSON.stringify(parsed));
          }
          const headers = { ...up.headers, 'content-length': String(body.length) };
          delete headers['transfer-encoding'];
          res.writeHead(up.statusCode ?? 500, headers);
          res.end(body);
        });
      });
      forward.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
      forward.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((done) => proxy.listen(0, '127.0.0.1', () => done()));
  return {
    endpoint: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    trimBefore: (sequenceNumber) => { trimBefore = sequenceNumber === null ? null : BigInt(sequenceNumber); },
    close: () => new Promise<void>((done) => { proxy.close(() => done()); proxy.closeAllConnections(); }),
  };
}
