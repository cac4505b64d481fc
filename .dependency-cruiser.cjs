/**
 * The layering of lib/, checked by `npm run lint:deps` (and a test). LAYERS lists the lowest
 * first: an import may point to an earlier layer or within its own folder, never to a later one;
 * no import cycles anywhere; the engine core
 * (everything below lib/aws) imports no AWS SDK and no aws-cdk-lib; cdk/ sees only the deployment
 * contract of lib.
 */
const LAYERS = [
  ['errors', 'core'],
  // sql parses text into plan expressions; plan's expr() parses text: one layer.
  ['plan', 'sql'],
  ['analysis'],
  ['execution', 'state'],
  ['sources', 'sinks', 'checkpoint'],
  ['runtime'],
  ['api'],
  ['query'],
  ['aws'],
  ['local'],
  ['testing'],
];
const ENGINE_CORE = LAYERS.slice(0, LAYERS.findIndex((l) => l.includes('aws'))).flat();

const upward = LAYERS.flatMap((layer, rank) => {
  const above = LAYERS.slice(rank + 1).flat();
  if (above.length === 0) return [];
  return [{
    name: `no-upward-from-${layer.join('-')}`,
    comment: `lib/{${layer.join(',')}} sits below lib/{${above.join(',')}}: dependencies point down only`,
    severity: 'error',
    from: { path: `^lib/(${layer.join('|')})/` },
    to: { path: `^lib/(${above.join('|')})/` },
  }];
});

module.exports = {
  forbidden: [
    ...upward,
    {
      name: 'no-circular',
      comment: 'import cycles hide the real layering (type-only imports included)',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'engine-core-imports-no-aws',
      comment: 'the engine core runs the same in memory, in tests and on Lambda; AWS lives in lib/aws adapters',
      severity: 'error',
      from: { path: `^lib/(${ENGINE_CORE.join('|')})/` },
      to: { path: '(^|/)node_modules/(@aws-sdk|@smithy|aws-cdk-lib|constructs|@aws-lambda-powertools)/' },
    },
    {
      name: 'lib-imports-no-cdk-or-cli',
      comment: 'lib/ is the library; cdk/, bin/ and functions/ are built on it, never the reverse',
      severity: 'error',
      from: { path: '^lib/' },
      to: { path: '^(cdk|bin|functions|test|bench|examples)/' },
    },
    {
      name: 'cdk-imports-the-deployment-contract-only',
      comment: 'the construct knows the query definition, how to load and validate it, the environment/metric contract with the runtime and the price table (data only); not the engine',
      severity: 'error',
      from: { path: '^cdk/' },
      to: {
        path: '^lib/',
        pathNot: '^lib/(query/(query-definition|validate-query|query-module)|runtime/(runtime-config|metric-names)|core/price-table)\\.ts$',
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
