/** Append mode → S3 files: each (hour, store) row once, after the watermark closes its hour. */
import { hourlySalesQuery } from './hourly-sales.js';

export default hourlySalesQuery('hourly-sales-archive', 'append', { kind: 's3-files', prefix: 'hourly-sales/archive/' });
