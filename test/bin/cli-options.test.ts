/** The CLI's option parsers: endpoints per service, rates. */
import { describe, expect, it } from 'vitest';
import { parseEndpoints } from '../../bin/commands/common.js';
import { parseRate, parseRateOption, ratesFor, shareOf } from '../../bin/commands/cost.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import { joinThenWindowedSum } from '../support/chain-queries.js';

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

  it('--match-rate: a share from 0 to 1', () => {
    const parse = shareOf('--match-rate');
    expect(parse('0.8')).toBe(0.8);
    expect(parse('0')).toBe(0);
    expect(parse('1')).toBe(1);
    for (const bad of ['', 'most', '1.5', '-0.1']) expect(() => parse(bad), bad).toThrow(/--match-rate must be a share from 0 to 1/);
  });
});

describe('sluice cost --rate per source', () => {
  const oneStream = hourlySalesQuery('update', 'rates-one');
  const twoStreams = joinThenWindowedSum('rates-two');

  it('parses N/s or source=N/s,…', () => {
    expect(parseRateOption('1000/s')).toBe(1000);
    expect(parseRateOption('orders=1000/s,payments=60/min')).toEqual({ orders: 1000, payments: 1 });
    expect(() => parseRateOption('orders=fast')).toThrow(/--rate must be records per second/);
    expect(() => parseRateOption('orders=1/s,orders=2/s')).toThrow(/given twice/);
    expect(() => parseRateOption('=5/s')).toThrow(/not source=N\/s/);
  });

  it('fits the rates to the query: one stream, one rate; several, one rate per source', () => {
    expect(ratesFor(oneStream, 1000)).toEqual({ rates: { kinesis: 1000 } });
    expect(ratesFor(twoStreams, { orders: 10, payments: 2 })).toEqual({ rates: { orders: 10, payments: 2 } });
    expect(ratesFor(twoStreams, { orders: 10 })).toEqual({ error: expect.stringMatching(/no rate for source 'payments' of query 'rates-two'/) });
    expect(ratesFor(twoStreams, 1000)).toEqual({ error: expect.stringMatching(/reads 2 streams; give each its rate/) });
    expect(ratesFor(twoStreams, { orders: 1, payments: 1, refunds: 1 })).toEqual({ error: expect.stringMatching(/has no source 'refunds'/) });
    expect(ratesFor(oneStream, { a: 1, b: 2 })).toEqual({ error: expect.stringMatching(/reads one stream/) });
  });
});
