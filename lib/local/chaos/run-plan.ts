/**
 * Each run's fault plans, per Lambda function of the run (`<query>`, `<query>/<source>`,
 * `<query>/stage-<n>`, `<query>/scheduled`), drawn from the seed and the fault-free run's counts.
 */
import { stateRoutingOf } from '../../aws/reshard-guard.js';
import type { CompiledQuery } from '../../query/compiled-query.js';
import { createPrng } from '../sample-events.js';
import { planFaults, SOURCE_ONLY_KINDS, type FaultKind, type PlannedFault, type PointCounts } from './faults.js';

export interface RunPlanOptions {
  readonly seed: number;
  readonly run: number;
  /** Points per function as the fault-free run met them. */
  readonly counts: ReadonlyMap<string, PointCounts>;
  /** The scheduled functions' points every tick is sure to meet (fault-free run). */
  readonly certainCounts: ReadonlyMap<string, PointCounts>;
  readonly extraFaults: number;
  readonly reshard: boolean;
  readonly expirePlanned: boolean;
  /** Functions whose stream must not be resharded (see `undivisibleStages`). */
  readonly noReshard: ReadonlySet<string>;
}

/**
 * The functions of internal-stream stages whose state cannot be split among a split's children
 * (a join feeding a join on another key, global aggregates): the engine refuses such a split by
 * design (note 25, "a shard still blocked by design"), so 'reshard-mid-run' is not planned there.
 * Decided by the engine's own routing of each stage's stores, as the reshard guard decides.
 */
export function undivisibleStages(query: CompiledQuery): string[] {
  return query.hops.flatMap((_, k) => {
    const stage = query.stageReadingHop(k);
    return stateRoutingOf(query, stage).some((s) => s.routingKey === null) ? [`${query.name}/stage-${k + 2}`] : [];
  });
}

export function planRunFaults(options: RunPlanOptions): Map<string, PlannedFault[]> {
  const { seed, run, extraFaults } = options;
  const planRnd = createPrng(seed * 104_729 + run);
  return new Map([...options.counts].map(([id, c]) => {
    // A stage reading an internal stream has no re-drive; the scheduled function no mapping.
    const sourceFunction = !/\/(stage-\d+|scheduled)$/.test(id);
    const optIn: FaultKind[] = [
      ...(options.reshard && !options.noReshard.has(id) ? ['reshard-mid-run' as const] : []),
      ...(options.expirePlanned ? ['planned-then-expired' as const] : []),
    ];
    const drawn = planFaults(planRnd, c, extraFaults, optIn, sourceFunction ? [] : SOURCE_ONLY_KINDS, id.endsWith('/scheduled') ? 0.4 : 0.7);
    // The scheduled function's share of the work depends on how far the stages' own (faulted)
    // invocations got (seed 2: a run whose ticks met commit-write 0 times, the fault-free run
    // 4), so its faults go only where every tick is sure to pass, from their own random
    // numbers: `drawn` is still drawn from planRnd so every other function's plan stays as it was.
    // This holds for a query of any number of hops: what every tick meets does not depend on them.
    const plan = id.endsWith('/scheduled')
      ? planFaults(createPrng(seed * 7_727 + run), options.certainCounts.get(id) ?? {}, extraFaults, optIn, SOURCE_ONLY_KINDS, 1)
      : drawn;
    return [id, plan] as const;
  }));
}
