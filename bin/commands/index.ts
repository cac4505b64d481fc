/** The commands that work on a deployed query or a query module before deploying it. */
import type { Command } from 'commander';
import { registerCostCommand } from './cost.js';
import { registerDiffCommand } from './diff.js';
import { registerInspectCommands } from './inspect.js';
import { registerRedriveCommand } from './redrive.js';
import { registerReplayCommand } from './replay.js';
import { registerSpillCommand } from './spill.js';

export function registerDeployedQueryCommands(program: Command): void {
  registerInspectCommands(program);
  registerDiffCommand(program);
  registerCostCommand(program);
  registerRedriveCommand(program);
  registerReplayCommand(program);
  registerSpillCommand(program);
}
