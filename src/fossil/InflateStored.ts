/**
 * blob.content (and an unversioned file's stored content) as Fossil stores it: a 4-byte
 * big-endian size, then a zlib stream. Decoded by node's zlib: a decoder of bytes that arrive
 * from other people is not worth writing by hand for the microseconds it saves a post
 * (`npm run bench -- inflate` measures the node's round both ways; docs/architecture.md).
 */
import * as Zlib from "node:zlib"

export const inflateStored = (stored: Uint8Array, length: number = stored.length): Buffer =>
  Zlib.inflateSync(Buffer.from(stored.buffer, stored.byteOffset + 4, length - 4))
