// LocalStack starts DynamoDB Local with `-javaagent:<its install dir>/ddb-local-loader-0.1.jar`, an
// agent it downloads from GitHub that raises DynamoDB Local's limit of 20 global secondary indexes
// per table. GitHub is out of reach here, and the JVM refuses to start when an agent jar is
// missing, so scripts/localstack/prepare.sh builds this agent in its place: it changes nothing,
// and DynamoDB Local runs as AWS ships it (Sluice's tables have no secondary index).
package sluice.localstack;

import java.lang.instrument.Instrumentation;

public final class NoPatchAgent {
  private NoPatchAgent() {}

  public static void premain(String args, Instrumentation instrumentation) {}
}
