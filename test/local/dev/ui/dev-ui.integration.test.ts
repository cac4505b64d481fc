/**
 * `sluice dev --ui` in a real browser: Debian's chromium, driven headless by playwright-core (no
 * browser download). The page is opened before the run and follows it live; at the end its
 * figures must equal the progress records the run produced (collected here through onProgress,
 * not from the page's own feed), its charts must have drawn, and a screenshot is kept under
 * test-artifacts/ (git-ignored).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runDev, type DevSummary } from '../../../../lib/local/dev/run-dev.js';
import { formatWatermark } from '../../../../lib/local/dev/report.js';
import { ProgressBoard } from '../../../../lib/local/dev/ui/progress-board.js';
import { startUiServer, type UiServer } from '../../../../lib/local/dev/ui/ui-server.js';
import type { StreamingQueryProgress } from '../../../../lib/runtime/progress.js';
import { PROJECT_ROOT } from '../../../support/sluice-cli.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = join(PROJECT_ROOT, 'test-artifacts');

interface Seen { shard: string; fromSource: boolean; routed: boolean; progress: StreamingQueryProgress }

describe('sluice dev --ui in headless Chromium', () => {
  let browser: Browser;
  let page: Page;
  let server: UiServer;
  let summary: DevSummary;
  const seen: Seen[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium; .ci/run does)`);
    const board = new ProgressBoard();
    server = await startUiServer(board);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1240, height: 1400 } });
    await page.goto(server.url);
    summary = await runDev({
      shards: 2, board, print: () => {},
      onProgress: (shard, stage, progress) => seen.push({ shard, progress, fromSource: stage.reads !== 'internal-stream', routed: stage.writes === 'internal-stream' }),
    });
    await page.waitForSelector('body[data-done="true"]');
    await page.waitForFunction((n) => document.getElementById('total-batches')?.textContent === String(n), seen.length);
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  const text = (selector: string): Promise<string> => page.locator(selector).innerText();
  const sum = (list: Seen[], f: (p: StreamingQueryProgress) => number): number => list.reduce((n, s) => n + f(s.progress), 0);
  const late = (p: StreamingQueryProgress): number => p.stateOperators.reduce((n, o) => n + o.numRowsDroppedByWatermark, 0);
  const stateRows = (p: StreamingQueryProgress): number => p.stateOperators.reduce((n, o) => n + o.numRowsTotal, 0);

  it('shows totals equal to the sums over the run\'s progress records', async () => {
    expect(seen.length).toBe(summary.batches);
    expect(seen.length).toBeGreaterThan(4);
    expect(await text('#total-batches')).toBe(String(seen.length));
    expect(await text('#total-input')).toBe(String(sum(seen.filter((s) => s.fromSource), (p) => p.numInputRows)));
    expect(await text('#total-input')).toBe(String(summary.inputRows));
    expect(await text('#total-output')).toBe(String(sum(seen.filter((s) => !s.routed), (p) => p.sink.numOutputRows)));
    expect(await text('#total-late')).toBe(String(sum(seen, late)));
    expect(Number(await text('#total-late'))).toBe(3); // the sample's wave-2 late rows
    expect(await text('#total-dead')).toBe(String(sum(seen, (p) => p.numDeadLetteredRows)));
  });

  it('shows per shard: batches, last batch, rows, watermark and state rows of its latest record', async () => {
    const shards = [...new Set(seen.map((s) => s.shard))].sort();
    expect(shards).toEqual(['shardId-000000000000', 'shardId-000000000001']);
    for (const shard of shards) {
      const mine = seen.filter((s) => s.shard === shard);
      const lastByTime = [...mine].sort((a, b) => Date.parse(a.progress.timestamp) - Date.parse(b.progress.timestamp)).at(-1)!.progress;
      const cells = await page.locator(`#shards tr[data-shard="${shard}"] td`).allInnerTexts();
      expect(cells).toEqual([
        shard, String(mine.length), String(Math.max(...mine.map((s) => s.progress.batchId))), String(sum(mine, (p) => p.numInputRows)),
        String(sum(mine, (p) => p.sink.numOutputRows)), formatWatermark(lastByTime.batchWatermarkMs), String(stateRows(lastByTime)),
        String(sum(mine, late)), String(sum(mine, (p) => p.numDeadLetteredRows)),
      ]);
    }
  });

  it('lists the dead letters with their reasons, and the last batches\' output as readable rows', async () => {
    const rows = await page.locator('#dead-letters tbody tr').allInnerTexts();
    expect(rows).toHaveLength(summary.deadLetters.length);
    expect(summary.deadLetters).toHaveLength(2);
    for (const d of summary.deadLetters) expect(rows.some((r) => r.includes(d.sequenceNumber) && r.includes(d.reason))).toBe(true);
    const outputs = page.locator('#outputs table');
    expect(await outputs.count()).toBeGreaterThan(0);
    expect(await outputs.first().locator('th').allInnerTexts()).toEqual(['window', 'store_id', 'sales', 'orders']);
    expect(await outputs.first().locator('td').first().innerText()).toMatch(/^\{2024-05-01 \d\d:00:00, 2024-05-01 \d\d:00:00\}$/);
  });

  it('draws the four charts over every batch (canvas pixels, not just elements)', async () => {
    const charts = await page.evaluate(() => {
      const all = (window as unknown as { sluiceCharts: Record<string, { data: unknown[][]; root: HTMLElement; series: { label?: string }[] }> }).sluiceCharts;
      return Object.entries(all).map(([id, c]) => {
        const canvas = c.root.querySelector('canvas')!;
        const pixels = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
        let painted = 0;
        for (let i = 3; i < pixels.length; i += 4) if (pixels[i]! > 0) painted++;
        return { id, points: c.data[0]!.length, labels: c.series.slice(1).map((x) => x.label), painted, size: canvas.width * canvas.height };
      });
    });
    expect(charts.map((c) => c.id).sort()).toEqual(['chart-duration', 'chart-lag', 'chart-rates', 'chart-state']);
    for (const c of charts) {
      expect(c.points, c.id).toBe(seen.length);
      expect(c.painted, `${c.id}: painted pixels`).toBeGreaterThan(500);
      expect(c.painted, `${c.id}: not all painted`).toBeLessThan(c.size);
    }
    // One state series per stateful operator of the query (hourly sales: one aggregation).
    const operators = seen.find((s) => s.progress.stateOperators.length > 0)!.progress.stateOperators.map((o, i) => `${i}:${o.operatorName}`);
    expect(operators).toHaveLength(1);
    expect(charts.find((c) => c.id === 'chart-state')!.labels).toEqual(operators);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'sluice-dev-ui.png'), fullPage: true });
    expect(existsSync(join(ARTIFACTS, 'sluice-dev-ui.png'))).toBe(true);
  });
});
