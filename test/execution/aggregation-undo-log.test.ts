/**
 * UndoLog: an aggregation table's changes, undone newest first; a cleared log is empty and can be
 * written again (the table recycles its logs).
 */
import { describe, expect, it } from 'vitest';
import { UndoLog, type UndoVisitor } from '../../lib/execution/aggregation-undo-log.js';

interface Group { readonly id: string; state: string | null }

function recorder(): { visitor: UndoVisitor<Group, string | null>; steps: string[] } {
  const steps: string[] = [];
  return {
    steps,
    visitor: {
      inserted: (g) => steps.push(`drop ${g.id}`),
      changed: (g, previous) => {
        steps.push(`restore ${g.id} to ${previous}`);
        g.state = previous;
      },
      removed: (g) => steps.push(`put back ${g.id}`),
    },
  };
}

describe('UndoLog', () => {
  it('undoes inserts, changes and removals newest first', () => {
    const log = new UndoLog<Group, string | null>();
    const a: Group = { id: 'a', state: 'a1' };
    const b: Group = { id: 'b', state: 'b2' };
    expect(log.isEmpty).toBe(true);
    log.insert(a);
    log.change(b, 'b1');
    log.remove(a);
    log.change(b, 'b0');
    expect(log.isEmpty).toBe(false);
    const { visitor, steps } = recorder();
    log.undo(visitor);
    expect(steps).toEqual(['restore b to b0', 'put back a', 'restore b to b1', 'drop a']);
    // Changes are undone in reverse: the oldest previous state wins.
    expect(b.state).toBe('b1');
  });

  it('after clear, is empty and records anew (nothing of before is undone)', () => {
    const log = new UndoLog<Group, string | null>();
    const a: Group = { id: 'a', state: null };
    const b: Group = { id: 'b', state: null };
    for (let i = 0; i < 100; i++) log.change(a, `a${i}`);
    log.clear();
    expect(log.isEmpty).toBe(true);
    const empty = recorder();
    log.undo(empty.visitor);
    expect(empty.steps).toEqual([]);
    log.insert(b);
    const again = recorder();
    log.undo(again.visitor);
    expect(again.steps).toEqual(['drop b']);
    expect(a.state).toBeNull();
  });
});
