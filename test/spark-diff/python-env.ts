/**
 * The pinned PySpark, installed on first use into .spark-diff/venv (git-ignored). PySpark 4.0.1:
 * the 4.0 line's maintenance release (4.0.0's streaming fixes included) and the line the conformance
 * scenarios' "Spark 4.x" expectations were written against; 4.1+ adds new streaming behaviour
 * (real-time mode, state store changes) that Sluice does not claim. Checked on 2026-12-04 with
 * `--pyspark 4.3.0 --all`: 53 of 61 cases match and 5 are known divergences, but a stream-stream
 * left semi join counts fewer state rows than 4.0.1 and Sluice (join-left-semi/basic and /seed-1),
 * and transformWithStateInPandas needs protobuf 6.33; so the pin stays until Sluice decides which
 * line's state metrics it follows (the inner join in update mode already follows 4.1+). `SPARK_DIFF_FIND_LINKS=<dir>`
 * lets pip take an already downloaded sdist (434 MB) instead of fetching it again.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export const PYSPARK_VERSION = '4.0.1';
/**
 * PySpark's pandas UDF paths (applyInPandasWithState, transformWithStateInPandas) need pandas and
 * pyarrow. pandas 2.3.3: the 2.x line PySpark 4.0 is tested with (pandas 3 changes string dtypes);
 * pyarrow 21.0.0: a release of the same season as PySpark 4.0.1, above its minimum (11).
 */
export const PANDAS_VERSION = '2.3.3';
export const PYARROW_VERSION = '21.0.0';
/**
 * transformWithStateInPandas talks to the JVM in protobuf; PySpark 4.0.1's stubs are 5.28 gencode,
 * 4.1+'s are 6.33 gencode (they refuse an older runtime, and the Python worker crashes).
 */
export const PROTOBUF_VERSION = '5.29.5';
const PROTOBUF_FOR_4_1_AND_LATER = '6.33.5';
const protobufFor = (pyspark: string): string => (/^4\.0\./.test(pyspark) ? PROTOBUF_VERSION : PROTOBUF_FOR_4_1_AND_LATER);
const pandasSpecs = (pyspark: string): string[] => [`pandas==${PANDAS_VERSION}`, `pyarrow==${PYARROW_VERSION}`, `protobuf==${protobufFor(pyspark)}`];

function run(cmd: string, args: string[]): void {
  execFileSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'] });
}

/**
 * Returns the venv's python, creating the venv and installing PySpark if needed. Another version
 * (`--pyspark 4.3.0`) gets its own venv, so the pinned one is never disturbed.
 */
export function ensurePython(root: string, version = PYSPARK_VERSION): string {
  const envDir = version === PYSPARK_VERSION ? '.spark-diff/venv' : `.spark-diff/venv-${version}`;
  const dir = join(root, envDir);
  const python = join(dir, 'bin', 'python');
  const marker = join(dir, `pyspark-${version}.installed`);
  // Its own marker, so a venv made before the stateful cases gets pandas/pyarrow on its next run.
  const pandasMarker = join(dir, `pandas-${PANDAS_VERSION}-pyarrow-${PYARROW_VERSION}-protobuf-${protobufFor(version)}.installed`);
  if (existsSync(marker) && existsSync(pandasMarker)) return python;
  const started = performance.now();
  const links = process.env.SPARK_DIFF_FIND_LINKS ? ['--find-links', process.env.SPARK_DIFF_FIND_LINKS] : [];
  const pip = (...specs: string[]): void => run(python, ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', ...links, ...specs]);
  if (existsSync(marker)) {
    console.log(`spark-diff: installing ${pandasSpecs(version).join(' ')} into ${envDir}`);
    pip(...pandasSpecs(version));
    execFileSync('touch', [pandasMarker]);
    console.log(`spark-diff: installed in ${((performance.now() - started) / 1000).toFixed(0)} s`);
    return python;
  }
  console.log(`spark-diff: installing pyspark==${version} into ${envDir} (first use; about 450 MB)`);
  if (!existsSync(python)) run(process.env.SPARK_DIFF_PYTHON ?? 'python3', ['-m', 'venv', dir]);
  pip(`pyspark==${version}`, ...pandasSpecs(version));
  run(python, ['-c', `import pyspark; assert pyspark.__version__ == '${version}', pyspark.__version__`]);
  execFileSync('touch', [marker]);
  execFileSync('touch', [pandasMarker]);
  console.log(`spark-diff: installed in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  return python;
}
