/** The CLI's option parsers: endpoints per service, rates. */
import { describe, expect, it } from 'vitest';
import { parseEndpoints } from '../../bin/commands/common.js';
import { parseRate } from '../../bin/commands/cost.js';

describe('sluice CLI options', () => {
  it('--endpoint: one URL for every service (LocalStack), or service=URL overriding it', () => {
    expect(parseEndpoints(['http://localhost:4566', 'dynamodb=http://localhost:8000'])).toEqual({
      kinesis: 'http://localhost:4566', dynamodb: 'http://localhost:8000', s3: 'http://localhost:4566',
      sqs: 'http://localhost:4566', cloudformation: 'http://localhost:4566',
    });
    expect(parseEndpoints(['s3=http://127.0.0.1:9000'])).toEqual({ s3: 'http://127.0.0.1:9000' });
    expect(() => parseEndpoints(['lambda=http://x'])).toThrow(/unknown service 'lambda'/);
  });

  it('--rate: records per second, minute or hour', () => {
    expect(parseRate('1000/s')).toBe(1000);
    expect(parseRate('1000')).toBe(1000);
    expect(parseRate('60000/min')).toBe(1000);
    expect(parseRate('3600/h')).toBe(1);
    for (const bad of ['fast', '0/s', '-5/s', '10/day']) expect(() => parseRate(bad), bad).toThrow(/--rate must be records per second/);
  });
});
