/** Helpers for the CDK tests: apps that skip bundling, paths, and template queries. */
import { App, Stack, Validations } from 'aws-cdk-lib';
import { afterAll } from 'vitest';
import type { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (sluice's own project: the example queries are bundled from it). */
export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const example = (file: string): string => join(PROJECT_ROOT, 'examples', file);
export const fixture = (file: string): string => join(dirname(fileURLToPath(import.meta.url)), 'fixtures', file);

/**
 * An app whose NodejsFunction assets are not bundled (the template is the same apart from the asset
 * hash), without CDK's built-in CloudFormation schema validation (slow; `cdk synth` runs it).
 */
export function appWithoutBundling(): App {
  return new App({ builtinCloudFormationValidation: false, context: { 'aws:cdk:bundling-stacks': [] }, outdir: appOutdir() });
}

/** Test apps' cloud assembly directories (CDK would make its own in the temp dir and leave it there). */
const outdirs: string[] = [];
// Each test file evaluates this module afresh: its apps' directories go when the file is done.
afterAll(() => {
  for (const dir of outdirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

export function appOutdir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cdk-test-'));
  outdirs.push(dir);
  return dir;
}

/**
 * An app output directory inside the project's cdk.out, for loading bundled functions: their
 * `require('@aws-sdk/...')` then finds the project's SDK as it finds the runtime's on Lambda (the
 * bundles leave it external). The project's package.json says "module": write
 * `{ "type": "commonjs" }` into an asset directory before loading its bundle.
 */
export function appOutdirInProject(): string {
  mkdirSync(join(PROJECT_ROOT, 'cdk.out'), { recursive: true });
  const dir = mkdtempSync(join(PROJECT_ROOT, 'cdk.out', 'sluice-cdk-test-'));
  outdirs.push(dir);
  return dir;
}

export function testStack(app: App = appWithoutBundling(), id = 'Test'): Stack {
  return new Stack(app, id, { env: { account: '123456789012', region: 'eu-west-1' } });
}

export interface PolicyStatementJson {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
  readonly Condition?: unknown;
}

/** Every statement of every AWS::IAM::Policy in the template. */
export function policyStatements(template: Template): PolicyStatementJson[] {
  const policies = template.findResources('AWS::IAM::Policy');
  return Object.values(policies).flatMap((p) => (p as { Properties: { PolicyDocument: { Statement: PolicyStatementJson[] } } }).Properties.PolicyDocument.Statement);
}

/** The statements of the policy attached to the role of the function with this logical-id prefix. */
export function statementsOfRole(template: Template, roleLogicalIdPrefix: string): PolicyStatementJson[] {
  const policies = template.findResources('AWS::IAM::Policy');
  return Object.values(policies)
    .filter((p) => ((p as { Properties: { Roles: { Ref: string }[] } }).Properties.Roles).some((r) => r.Ref.startsWith(roleLogicalIdPrefix)))
    .flatMap((p) => (p as { Properties: { PolicyDocument: { Statement: PolicyStatementJson[] } } }).Properties.PolicyDocument.Statement);
}

export const asArray = <T>(value: T | T[]): T[] => (Array.isArray(value) ? value : [value]);

/** cdk-nag's AwsSolutions pack over a construct tree: the violations not acknowledged. */
export function nagViolations(scope: IConstruct): { ruleName: string; paths: string[] }[] {
  const report = new AwsSolutionsChecks().validateScope(scope);
  return report.violations.map((v) => ({ ruleName: v.ruleName, paths: v.violatingResources.map((r) => r.resourceLogicalId ?? r.locations?.join(',') ?? '?') }));
}

/** Every acknowledgment recorded with `Validations.of(x).acknowledge(...)` under a scope (metadata `{ id: reason }`). */
export function acknowledgments(scope: IConstruct): { path: string; id: string; reason: string }[] {
  return scope.node.findAll().flatMap((c) => c.node.metadata
    .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
    .flatMap((m) => Object.entries(m.data as Record<string, string>))
    .map(([id, reason]) => ({ path: c.node.path, id, reason })));
}
