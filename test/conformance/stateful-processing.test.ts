import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runScenario } from './scenario-runner.js';
import { keyValueMode, ownTableMode } from './state-modes.js';

/** Sluice's own scenarios for transformWithState and [flat]mapGroupsWithState, in the conformance format. */
const dir = new URL('./stateful/', import.meta.url);
const scenarios = readdirSync(dir).filter((f) => f.endsWith('.json')).sort()
  .map((f) => JSON.parse(readFileSync(new URL(f, dir), 'utf8')) as { id: string });

describe('stateful processing scenarios', () => {
  for (const scenario of scenarios) {
    it(`${scenario.id} (own-table)`, async () => {
      expect(await runScenario(scenario, ownTableMode)).toEqual({ id: scenario.id, passed: true });
    });
    it(`${scenario.id} (key-value: the DynamoDB store)`, async () => {
      expect(await runScenario(scenario, keyValueMode())).toEqual({ id: scenario.id, passed: true });
    });
  }
});
