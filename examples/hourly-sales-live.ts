/** Update mode → DynamoDB: one item per (hour, store), upserted whenever a batch changes it. */
import { hourlySalesQuery } from './hourly-sales.js';

export default hourlySalesQuery('hourly-sales-live', 'update', { kind: 'dynamodb' });
