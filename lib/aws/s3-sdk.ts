/**
 * The S3 part of the AWS SDK, loaded at its first use rather than at module load. Loading
 * `@aws-sdk/client-s3` costs a function about 25 ms of CPU at init (bench/bundles.bench.ts), and a
 * function whose sink is DynamoDB needs S3 only for a dead letter or a spilled value, so the
 * adapters take their commands from `s3Sdk()` and the functions' clients build their S3 client at
 * its first request (`s3ClientOnFirstUse`). In a CommonJS bundle the dynamic import becomes a
 * `require` run at that point.
 */
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';

type S3Sdk = typeof import('@aws-sdk/client-s3');

let loading: Promise<S3Sdk> | undefined;

/** The `@aws-sdk/client-s3` module, loaded once per process. */
export function s3Sdk(): Promise<S3Sdk> {
  loading ??= import('@aws-sdk/client-s3');
  return loading;
}

const BUILD = Symbol('sluice.s3ClientOnFirstUse');

interface DeferredS3Client {
  readonly [BUILD]: () => Promise<S3Client>;
}

/**
 * An S3 client whose SDK module is loaded, and the client built, at its first request. It answers
 * `send` and `destroy`, which is all the adapters call; `builtS3Client` gives the client itself
 * (tracing instruments its middleware).
 */
export function s3ClientOnFirstUse(config: S3ClientConfig): S3Client {
  let built: Promise<S3Client> | undefined;
  let client: S3Client | undefined;
  const build = (): Promise<S3Client> => {
    built ??= s3Sdk().then(({ S3Client: S3ClientClass }) => {
      client = new S3ClientClass(config);
      return client;
    });
    return built;
  };
  const deferred: DeferredS3Client & Pick<S3Client, 'send' | 'destroy'> = {
    [BUILD]: build,
    send: (async (command: Parameters<S3Client['send']>[0], ...rest: unknown[]) => {
      const real = await build();
      return (real.send as (...args: unknown[]) => Promise<unknown>)(command, ...rest);
    }) as S3Client['send'],
    destroy: () => client?.destroy(),
  };
  return deferred as unknown as S3Client;
}

/** The client itself: built now when `client` is deferred (s3ClientOnFirstUse), else `client`. */
export function builtS3Client(client: S3Client): Promise<S3Client> {
  const build = (client as unknown as Partial<DeferredS3Client>)[BUILD];
  return build ? build() : Promise.resolve(client);
}
