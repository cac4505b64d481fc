/** The --ui server's routes: the page, uPlot from node_modules, the board replayed then followed over SSE. */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it } from 'vitest';
import { ProgressBoard } from '../../../../lib/local/dev/ui/progress-board.js';
import { startUiServer, type UiServer } from '../../../../lib/local/dev/ui/ui-server.js';

let server: UiServer | undefined;
afterEach(async () => { await server?.close(); server = undefined; });

describe('the --ui server', () => {
  it('serves the page and the pinned uPlot build from node_modules, on the loopback interface', async () => {
    server = await startUiServer(new ProgressBoard());
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const page = await fetch(server.url);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(await page.text()).toContain('<script src="/uplot.js"></script>');
    const uplot = Buffer.from(await (await fetch(new URL('/uplot.js', server.url))).arrayBuffer());
    expect(uplot.equals(readFileSync(createRequire(import.meta.url).resolve('uplot/dist/uPlot.iife.min.js')))).toBe(true);
    const pinned = JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as { dependencies: Record<string, string> };
    expect(pinned.dependencies.uplot).toMatch(/^\d+\.\d+\.\d+$/);
    expect((await fetch(new URL('/nope', server.url))).status).toBe(404);
  });

  it('replays what was published before a client came, then streams what follows; the dead-letter list is replaced whole', async () => {
    const board = new ProgressBoard();
    server = await startUiServer(board);
    board.publish({ type: 'status', text: 'first', done: false });
    board.publishDeadLetters([{ queryName: 'q', shardId: 's0', sequenceNumber: '1', partitionKey: 'k', approximateArrivalTimestampMs: 0, dataBase64: Buffer.from('{"a":').toString('base64'), reason: 'malformed JSON' }]);
    const response = await fetch(new URL('/events', server.url));
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const reader = response.body!.getReader();
    const events: { type: string; text?: string; deadLetters?: unknown[] }[] = [];
    let buffer = '';
    const readUntil = async (n: number): Promise<void> => {
      while (events.length < n) {
        const { value } = await reader.read();
        buffer += Buffer.from(value!).toString('utf8');
        const parts = buffer.split('\n\n');
        buffer = parts.pop()!;
        for (const part of parts) events.push(JSON.parse(part.replace(/^data: /, '')) as never);
      }
    };
    await readUntil(2);
    board.publish({ type: 'status', text: 'second', done: true });
    await readUntil(3);
    await reader.cancel();
    expect(events.map((e) => e.type)).toEqual(['status', 'deadLetters', 'status']);
    expect(events[1]!.deadLetters).toEqual([{ shardId: 's0', sequenceNumber: '1', partitionKey: 'k', reason: 'malformed JSON', data: '{"a":' }]);
    expect(events[2]!.text).toBe('second');

    board.publishDeadLetters([]);
    const snapshot = await (await fetch(new URL('/events.json', server.url))).json() as { type: string }[];
    expect(snapshot.filter((e) => e.type === 'deadLetters')).toEqual([{ type: 'deadLetters', deadLetters: [] }]);
  });
});
