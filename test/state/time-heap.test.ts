import { describe, expect, it } from 'vitest';
import { TimeHeap } from '../../lib/state/time-heap.js';

describe('TimeHeap', () => {
  const filled = (items: [number, string][]): TimeHeap => {
    const heap = new TimeHeap();
    for (const [t, k] of items) heap.add(t, k);
    return heap;
  };
  const items: [number, string][] = [[50, 'e'], [10, 'a'], [40, 'd'], [20, 'b'], [30, 'c'], [20, 'b2'], [60, 'f']];

  it('gives the live keys at or before a time, and the earliest live time, without changing itself', () => {
    const heap = filled(items);
    const live = (k: string): boolean => k !== 'a' && k !== 'b2';
    expect([...heap.due(30, live)].sort()).toEqual(['b', 'c']);
    expect([...heap.due(9, live)]).toEqual([]);
    expect(heap.earliest(live)).toBe(20);
    expect(heap.earliest(() => false)).toBe(null);
    expect(heap.size).toBe(items.length);
  });

  it('prune drops dead items from the top and rebuilds when most are dead', () => {
    const heap = filled(items);
    const dead = new Set(['a', 'b']);
    heap.prune((k) => !dead.has(k), () => [], 5);
    expect(heap.size).toBe(items.length - 2);
    expect(heap.earliest(() => true)).toBe(20);
    const many = filled(Array.from({ length: 500 }, (_, i) => [i, `k${i}`] as [number, string]));
    many.prune((k) => k !== 'k0', () => [['k7', 7], ['k3', 3]], 2);
    expect(many.size).toBe(2);
    expect([...many.due(10, () => true)].sort()).toEqual(['k3', 'k7']);
  });
});
