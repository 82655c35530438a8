// The one list of job kinds. A kind exists in the API exactly when it is listed here.
import { compress } from './compress.js';
import { convert } from './convert.js';
import type { Operation } from './types.js';

export const OPERATIONS: readonly Operation<any>[] = [compress, convert];

const byKind = new Map(OPERATIONS.map((op) => [op.kind, op]));

export function getOperation(kind: string): Operation<any> | undefined {
  return byKind.get(kind);
}
