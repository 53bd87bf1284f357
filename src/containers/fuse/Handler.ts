import * as Os from "node:os"
import {
  AskFormatError,
  decodeAsk,
  encodeList,
  encodeStat,
  encodeStatfs,
  encodeWritten,
  Errno,
  errnoAnswer,
  okAnswer,
  type Ask,
  type DirEntry,
  type SetAttr,
  type Stat,
  type Statfs
} from "./Ask.js"

/**
 * The client's side of a FUSE mount: what answers the asks of one mount id. Each method
 * answers one op (docs/containers.md, "FUSE asks"); throwing `FuseErrno`, or a Node error with
 * an errno code (ENOENT ...), answers that errno. A method left out answers ENOSYS.
 */
export interface FuseHandler {
  readonly stat?: (path: string) => Promise<Stat>
  readonly list?: (path: string) => Promise<ReadonlyArray<DirEntry>>
  readonly read?: (path: string, offset: bigint, size: number) => Promise<Uint8Array>
  /** the number of bytes written */
  readonly write?: (path: string, offset: bigint, data: Buffer) => Promise<number>
  readonly create?: (path: string, mode: number) => Promise<Stat>
  readonly mkdir?: (path: string, mode: number) => Promise<Stat>
  readonly unlink?: (path: string) => Promise<void>
  readonly rmdir?: (path: string) => Promise<void>
  /** flags: 1 RENAME_NOREPLACE, 2 RENAME_EXCHANGE, as the container's program asked */
  readonly rename?: (path: string, to: string, flags: number) => Promise<void>
  /** what SET's mask names changed; the attributes after */
  readonly setattr?: (path: string, set: SetAttr) => Promise<Stat>
  readonly fsync?: (path: string, datasync: boolean) => Promise<void>
  readonly statfs?: (path: string) => Promise<Statfs>
  readonly readlink?: (path: string) => Promise<Uint8Array>
}

export class FuseErrno extends Error {
  constructor(readonly errno: number) {
    super(`errno ${errno}`)
  }
}

/** the errno an error stands for: FuseErrno's, a Node error's code, else EIO */
export const errnoOf = (e: unknown): number => {
  if (e instanceof FuseErrno) return e.errno
  const code = (e as { code?: unknown } | undefined)?.code
  if (typeof code === "string") {
    const n = (Os.constants.errno as Record<string, number | undefined>)[code]
    if (n !== undefined) return n
  }
  return Errno.EIO
}

const answerOp = async (h: FuseHandler, ask: Ask): Promise<Buffer> => {
  const missing = () => {
    throw new FuseErrno(Errno.ENOSYS)
  }
  switch (ask.op) {
    case "stat":
      return encodeStat(await (h.stat ?? missing)(ask.path))
    case "list":
      return encodeList(await (h.list ?? missing)(ask.path))
    case "read":
      return Buffer.from(await (h.read ?? missing)(ask.path, ask.offset, ask.size))
    case "write":
      return encodeWritten(await (h.write ?? missing)(ask.path, ask.offset, ask.data))
    case "create":
      return encodeStat(await (h.create ?? missing)(ask.path, ask.mode))
    case "mkdir":
      return encodeStat(await (h.mkdir ?? missing)(ask.path, ask.mode))
    case "unlink":
      await (h.unlink ?? missing)(ask.path)
      return Buffer.alloc(0)
    case "rmdir":
      await (h.rmdir ?? missing)(ask.path)
      return Buffer.alloc(0)
    case "rename":
      await (h.rename ?? missing)(ask.path, ask.to, ask.flags)
      return Buffer.alloc(0)
    case "setattr":
      return encodeStat(await (h.setattr ?? missing)(ask.path, ask.set))
    case "fsync":
      await (h.fsync ?? missing)(ask.path, ask.datasync)
      return Buffer.alloc(0)
    case "statfs":
      return encodeStatfs(await (h.statfs ?? missing)(ask.path))
    case "readlink":
      return Buffer.from(await (h.readlink ?? missing)(ask.path))
  }
}

/**
 * The answer to one FUSE ask (a relayed channel's request): the handler of its mount id answers
 * it. An ask of a mount with no handler is answered EIO; bytes that are no ask, EINVAL.
 */
export const answerFuseAsk = async (handlers: (id: string) => FuseHandler | undefined, request: Buffer): Promise<Buffer> => {
  let decoded: { id: string; ask: Ask }
  try {
    decoded = decodeAsk(request)
  } catch (e) {
    return errnoAnswer(e instanceof AskFormatError ? Errno.EINVAL : Errno.EIO)
  }
  const handler = handlers(decoded.id)
  if (handler === undefined) return errnoAnswer(Errno.EIO)
  try {
    return okAnswer(await answerOp(handler, decoded.ask))
  } catch (e) {
    return errnoAnswer(errnoOf(e))
  }
}
