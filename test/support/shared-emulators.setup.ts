/**
 * The integration project's setup file: `startEmulators` (the tests', and sluice/testing's) returns
 * the run's shared emulators (shared-emulators.global.ts) instead of starting a set per file; its
 * `stop` leaves them running for the next file. Child processes a test spawns (the CLI, a packed
 * app's `sluice dev`) are not affected: they start their own, as a user's would.
 *
 * Files that test `sluice dev`'s own start-up in process keep starting theirs: it provisions fixed
 * names ('dev') on emulators it believes are its own, and says what it started.
 */
import { expect, inject, vi } from 'vitest';
import type { EmulatorSet } from '../../lib/local/emulators.js';

const OWN_EMULATORS = ['/test/local/dev/'];

vi.mock('../../lib/local/emulators.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../lib/local/emulators.js')>();
  const shared = inject('sharedEmulators');
  const testPath = expect.getState().testPath ?? '';
  if (!shared || OWN_EMULATORS.some((dir) => testPath.includes(dir))) return original;
  const set: EmulatorSet = {
    endpoints: shared.clientOptions.endpoints!,
    clientOptions: shared.clientOptions,
    external: false,
    stop: async () => {},
  };
  return { ...original, startEmulators: async () => set };
});
