/**
 * A state payload (JSON, then gzip) written a piece at a time. Building the whole JSON text of a
 * large state before compressing it held, at the moment of the write, a second copy of the state
 * as text beside the state itself (about twice the resident set of the batch before, measured at
 * 1M keys: 1,853 vs 959 MB), and a text over V8's longest string (about 512 MB) could not be built
 * at all. Here the text exists only as pieces of about PIECE_BYTES, each compressed as it is made.
 *
 * The bytes are those of `gzipSync(encodeStateJson(payload))`: zlib's output does not depend on how
 * its input is cut when nothing is flushed, and each entry is tagged exactly as the whole payload
 * would be (tags only touch the values that need them), so a re-run writes the same hash.
 */
import { createGzip } from 'node:zlib';
import { encodeStateJson } from './state-json.js';

/** Text handed to zlib at once: large enough that the calls cost nothing, small beside any state worth streaming. */
export const PIECE_BYTES = 256 * 1024;

/** The payload's parts in order: literal JSON text, or an array's elements (written without the brackets). */
export type PayloadPart = string | { readonly elements: Iterable<unknown> };

/** What the write handed to zlib: for tests and the bench, the largest piece and the whole text's length. */
export interface PayloadStats {
  largestPiece: number;
  textLength: number;
}

/**
 * The JSON text of `parts`, a piece of about PIECE_BYTES at a time. Elements are encoded a slice at
 * a time (one JSON.stringify per slice: as fast as one for the whole text), each slice as long as
 * the last one's elements suggest fits in a piece, at most MAX_SLICE. A piece is thus larger than
 * PIECE_BYTES only when one element is, or when the elements of one slice suddenly grow.
 */
export function* jsonPieces(parts: readonly PayloadPart[]): Generator<string> {
  let perSlice = 1;
  for (const part of parts) {
    if (typeof part === 'string') {
      yield part;
      continue;
    }
    let first = true;
    let slice: unknown[] = [];
    const flush = (): string => {
      // Tagged when any element needs it: tags touch only those values, so the bytes are the whole payload's.
      const text = encodeStateJson(slice, slice);
      perSlice = Math.max(1, Math.min(MAX_SLICE, Math.floor((PIECE_BYTES * slice.length) / text.length)));
      slice = [];
      const elements = text.slice(1, -1);
      const piece = first ? elements : `,${elements}`;
      first = false;
      return piece;
    };
    for (const element of part.elements) {
      slice.push(element);
      if (slice.length >= perSlice) yield flush();
    }
    if (slice.length > 0) yield flush();
  }
}

const MAX_SLICE = 1024;

/** gzip of the text of `parts`, compressed as it is made. */
export async function gzipJsonParts(parts: readonly PayloadPart[], stats?: PayloadStats): Promise<Buffer> {
  const gzip = createGzip();
  const out: Buffer[] = [];
  gzip.on('data', (chunk: Buffer) => out.push(chunk));
  const ended = new Promise<void>((resolve, reject) => {
    gzip.on('end', resolve);
    gzip.on('error', reject);
  });
  for (const piece of jsonPieces(parts)) {
    if (stats) {
      stats.largestPiece = Math.max(stats.largestPiece, piece.length);
      stats.textLength += piece.length;
    }
    if (!gzip.write(piece)) await new Promise<void>((resolve) => gzip.once('drain', resolve));
  }
  gzip.end();
  await ended;
  return Buffer.concat(out);
}
