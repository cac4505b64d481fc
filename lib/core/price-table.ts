/**
 * The one versioned price table (USD, on-demand list prices) behind every dollar figure Sluice
 * shows: `sluice cost` (which `--prices file.json` overrides key by key), the construct's
 * dashboard ($ per hour) and the end-to-end cost benchmark. A new price list is a new constant;
 * CURRENT_PRICES names the one in use.
 */
export interface PriceTable {
  readonly version: string;
  readonly lambdaPerMillionRequests: number;
  /** Lambda on arm64 (Graviton), the architecture the construct deploys its functions on. */
  readonly lambdaPerGbSecond: number;
  readonly dynamoDbPerMillionWriteUnits: number;
  readonly dynamoDbPerMillionReadUnits: number;
  readonly dynamoDbPerGbMonth: number;
  /** S3 Standard PUT, COPY, POST and LIST requests. */
  readonly s3PerThousandPuts: number;
  /** S3 Standard GET (and HEAD) requests. */
  readonly s3PerThousandGets: number;
  readonly kinesisPerShardHour: number;
  readonly kinesisPerMillionPutPayloadUnits: number;
  readonly eventBridgePerMillionEvents: number;
}

export const PRICES_2026_12_US_EAST_1: PriceTable = {
  version: '2026-12 us-east-1 on-demand',
  lambdaPerMillionRequests: 0.20,
  // arm64; x86_64 is $0.0000166667, which no Sluice function runs on.
  lambdaPerGbSecond: 0.0000133334,
  dynamoDbPerMillionWriteUnits: 0.625,
  dynamoDbPerMillionReadUnits: 0.125,
  dynamoDbPerGbMonth: 0.25,
  s3PerThousandPuts: 0.005,
  s3PerThousandGets: 0.0004,
  kinesisPerShardHour: 0.015,
  kinesisPerMillionPutPayloadUnits: 0.014,
  eventBridgePerMillionEvents: 1.00,
};

export const CURRENT_PRICES: PriceTable = PRICES_2026_12_US_EAST_1;

/** The table's prices per single unit (one write unit, one request, one GB-second). */
export interface UnitPrices {
  readonly dynamoDbWriteUnit: number;
  readonly dynamoDbReadUnit: number;
  readonly s3Put: number;
  readonly s3Get: number;
  readonly lambdaGbSecond: number;
  readonly lambdaRequest: number;
}

export function unitPrices(table: PriceTable): UnitPrices {
  return {
    dynamoDbWriteUnit: table.dynamoDbPerMillionWriteUnits / 1e6,
    dynamoDbReadUnit: table.dynamoDbPerMillionReadUnits / 1e6,
    s3Put: table.s3PerThousandPuts / 1000,
    s3Get: table.s3PerThousandGets / 1000,
    lambdaGbSecond: table.lambdaPerGbSecond,
    lambdaRequest: table.lambdaPerMillionRequests / 1e6,
  };
}
