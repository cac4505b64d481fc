/**
 * The `sluice dev --ui` server: node:http on the loopback interface, no framework. `/` is the page,
 * `/uplot.js` and `/uplot.css` the chart library from node_modules, `/events` the board as
 * server-sent events (replayed, then live), `/events.json` the same list at once.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { PAGE_HTML } from './page.js';
import type { ProgressBoard } from './progress-board.js';

const require = createRequire(import.meta.url);

function asset(path: string): Buffer {
  return readFileSync(require.resolve(path));
}

export interface UiServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function startUiServer(board: ProgressBoard, options: { port?: number; host?: string } = {}): Promise<UiServer> {
  // Read once at start: a missing package fails here, not when the browser asks.
  const assets: Record<string, { type: string; body: Buffer | string }> = {
    '/': { type: 'text/html; charset=utf-8', body: PAGE_HTML },
    '/uplot.js': { type: 'text/javascript; charset=utf-8', body: asset('uplot/dist/uPlot.iife.min.js') },
    '/uplot.css': { type: 'text/css; charset=utf-8', body: asset('uplot/dist/uPlot.min.css') },
  };
  const streams = new Set<ServerResponse>();
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0]!;
    if (request.method !== 'GET') { response.writeHead(405).end(); return; }
    const file = assets[path];
    if (file) { response.writeHead(200, { 'content-type': file.type, 'cache-control': 'no-store' }).end(file.body); return; }
    if (path === '/events.json') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(board.snapshot()));
      return;
    }
    if (path === '/events') {
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
      streams.add(response);
      const stop = board.follow((event) => { response.write(`data: ${JSON.stringify(event)}\n\n`); });
      request.on('close', () => { stop(); streams.delete(response); });
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${options.host ?? '127.0.0.1'}:${port}/`,
    close: () => new Promise<void>((resolve) => {
      for (const stream of streams) stream.end();
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
