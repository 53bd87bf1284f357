import { WebSocket } from "ws"
import { FrameConnection, type Channel, type PeerChannel, type Scope } from "./FrameConnection.js"
import { tagged } from "./Frames.js"
import { memberText } from "./VerbatimMember.js"
import { fuseAskTag } from "./fuse/Ask.js"
import { answerFuseAsk, type FuseHandler } from "./fuse/Handler.js"
import { ClientChannel, decodeVolumeRefusal, Endpoint, ServerChannel, Answer } from "./Wire.js"

/**
 * A client of the tool-container server (docs/containers.md): used by the tests and by
 * `ocx2 containers run`. It answers the server's channels itself (the image from `images`,
 * the registration from `registration`, a write's bytes), answers the asks of its FUSE mounts
 * with their handlers (`fuse`, by mount id), and hands other relayed asks to `onAsk`.
 */
export interface ClientImage {
  readonly repository: string
  readonly manifest: Uint8Array
  /** the config and every layer, by digest */
  readonly blobs: ReadonlyMap<string, Uint8Array>
}

export interface RunOptions {
  /** images the client holds, by manifest digest */
  readonly images?: ReadonlyMap<string, ClientImage>
  /** the answers to the registration channel (default: registered, no deploy) */
  readonly registration?: (id: string, declaration: string) => ReadonlyArray<Uint8Array>
  /** the handler of each FUSE mount, by its id: it answers the mount's asks */
  readonly fuse?: ReadonlyMap<string, FuseHandler>
  /** a channel the server relays that no FUSE handler answers (the container's own asks); unanswered by default */
  readonly onAsk?: (channel: PeerChannel) => void
  /** each response after the first, as it comes */
  readonly onLater?: (payload: Buffer) => void
  /** every server channel, before it is answered (tests watch the order) */
  readonly onServerChannel?: (channel: PeerChannel) => void
  /** the server asked to hold the scope (true: its proxy is behind) or to go on (false) */
  readonly onHold?: (held: boolean) => void
}

export type FirstAnswer =
  | { readonly kind: "id"; readonly id: string }
  | { readonly kind: "refusal"; readonly byte: number; readonly name: string; readonly mode?: string }
  | { readonly kind: "error"; readonly message: string }
  | { readonly kind: "bare" }
  | { readonly kind: "other"; readonly payload: Buffer }

export const describeFirst = (payload: Buffer | undefined): FirstAnswer => {
  if (payload === undefined) return { kind: "bare" }
  if (payload[0] === Answer.id) return { kind: "id", id: payload.subarray(1).toString("utf8") }
  if (payload[0] === Answer.error) return { kind: "error", message: payload.subarray(1).toString("utf8") }
  const refusal = decodeVolumeRefusal(payload)
  if (refusal !== undefined) return { kind: "refusal", ...refusal }
  return { kind: "other", payload }
}

export class ToolRun {
  /** the first response, decoded, once it came (or the bare finish) */
  readonly first: Promise<FirstAnswer>
  /** every response after the first, in order, to the finish */
  readonly later: Array<Buffer> = []
  /** resolves at the scope's finish (or the connection's end) */
  readonly finished: Promise<void>
  /** the FUSE handlers by mount id: those of the request, and those fuseMount added */
  readonly fuse: Map<string, FuseHandler>
  /**
   * Whether the server asked this scope to hold (its proxy is behind) and not yet to go on: a
   * client sends nothing more on the scope meanwhile (docs/containers.md section 1, "Flow
   * control"); what it answers by itself here is small.
   */
  held = false

  constructor(
    readonly scope: Scope,
    options: RunOptions
  ) {
    this.fuse = new Map(options.fuse ?? [])
    let resolveFirst!: (a: FirstAnswer) => void
    this.first = new Promise((resolve) => (resolveFirst = resolve))
    let seenFirst = false
    let resolveFinished!: () => void
    this.finished = new Promise((resolve) => (resolveFinished = resolve))
    scope.responses.listen(
      (payload) => {
        if (!seenFirst) {
          seenFirst = true
          resolveFirst(describeFirst(payload))
        } else {
          this.later.push(payload)
          options.onLater?.(payload)
        }
      },
      () => {
        if (!seenFirst) resolveFirst({ kind: "bare" })
        resolveFinished()
      }
    )
    scope.peerOpened.listen((channel) => {
      const tag = channel.request[0]
      if (tag !== ServerChannel.hold && tag !== ServerChannel.goOn) return answerServerChannel(channel, options, this.fuse)
      // each answered by its finish alone; the newest says how the scope stands
      options.onServerChannel?.(channel)
      channel.finish()
      this.held = tag === ServerChannel.hold
      options.onHold?.(this.held)
    }, () => {})
  }

  /** the client's stop channel */
  stop(): Channel {
    return this.scope.openChannel(tagged(ClientChannel.stop))
  }

  /** a secrets channel: the values, relayed to the container */
  secrets(values: string): Channel {
    return this.scope.openChannel(tagged(ClientChannel.secrets, values))
  }

  /** a FUSE mount asked for after the id; HANDLER answers its asks */
  fuseMount(id: string, containerPath: string, kind: "file" | "directory", handler?: FuseHandler): Channel {
    if (handler !== undefined) this.fuse.set(id, handler)
    return this.scope.openChannel(tagged(ClientChannel.fuseMount, JSON.stringify({ id, container_path: containerPath, kind })))
  }
}

const answerServerChannel = (channel: PeerChannel, options: RunOptions, fuse: ReadonlyMap<string, FuseHandler>): void => {
  options.onServerChannel?.(channel)
  const tag = channel.request[0]!
  const body = channel.request.subarray(1).toString("utf8")
  const images = options.images ?? new Map<string, ClientImage>()
  const send = (bytes: Uint8Array | undefined) => {
    if (bytes !== undefined) {
      for (let at = 0; at < bytes.length || at === 0; at += 256 * 1024) {
        channel.respond(tagged(Answer.ok, bytes.subarray(at, at + 256 * 1024)))
        if (bytes.length === 0) break
      }
    }
    channel.finish()
  }
  try {
    switch (tag) {
      case ServerChannel.ociHas: {
        const { digest } = JSON.parse(body) as { digest: string }
        const image = images.get(digest)
        if (image !== undefined) channel.respond(tagged(Answer.ok, image.repository))
        return channel.finish()
      }
      case ServerChannel.ociManifest: {
        const { repository, digest } = JSON.parse(body) as { repository: string; digest: string }
        const image = images.get(digest)
        return send(image?.repository === repository ? image.manifest : undefined)
      }
      case ServerChannel.ociBlob: {
        const { repository, digest } = JSON.parse(body) as { repository: string; digest: string }
        const image = [...images.values()].find((i) => i.repository === repository && i.blobs.has(digest))
        return send(image?.blobs.get(digest))
      }
      case ServerChannel.registration: {
        const text = body
        const id = (JSON.parse(text) as { id: string }).id
        const declaration = memberText(text, "secrets") ?? "{}"
        const answers = options.registration?.(id, declaration) ?? [tagged(Answer.registered)]
        for (const a of answers) channel.respond(a)
        return channel.finish()
      }
      case fuseAskTag:
        if (fuse.size > 0 || options.onAsk === undefined) {
          void answerFuseAsk((id) => fuse.get(id), channel.request).then((answer) => {
            channel.respond(answer)
            channel.finish()
          })
          return
        }
        return options.onAsk(channel)
      default:
        if (options.onAsk !== undefined) return options.onAsk(channel)
    }
  } catch {
    channel.finish()
  }
}

export interface CallResult {
  readonly responses: ReadonlyArray<Buffer>
  /** false: the connection ended before the finish */
  readonly finished: boolean
}

export class ContainersClient {
  constructor(readonly connection: FrameConnection) {}

  /** opens a scope with tag + body and gives its responses once it finished */
  async call(tag: number, body: string | Uint8Array, onChannel?: (channel: PeerChannel) => void): Promise<CallResult> {
    const scope = this.connection.openScope(tagged(tag, body))
    if (onChannel !== undefined) scope.peerOpened.listen(onChannel, () => {})
    const responses: Array<Buffer> = []
    for (;;) {
      const payload = await scope.responses.take()
      if (payload === undefined) {
        if (this.connection.closeCode === 4401) throw new ContainersError("the server did not accept the token")
        return { responses, finished: !this.connection.isClosed }
      }
      responses.push(payload)
    }
  }

  run(request: string | object, options: RunOptions = {}): ToolRun {
    const body = typeof request === "string" ? request : JSON.stringify(request)
    return new ToolRun(this.connection.openScope(tagged(Endpoint.toolsRun, body)), options)
  }

  volumesList = async (): Promise<ReadonlyArray<{ name: string; mode: string }>> => {
    const r = await this.call(Endpoint.volumesList, "{}")
    return JSON.parse(okBody(r).toString("utf8")) as Array<{ name: string; mode: string }>
  }

  volumesCreate = async (name: string, mode: string): Promise<void> => {
    okBody(await this.call(Endpoint.volumesCreate, JSON.stringify({ name, mode })))
  }

  /** writes BYTES to PATH in VOLUME; `hold` keeps the write in flight until it resolves */
  volumesWrite = async (volume: string, path: string, bytes: Uint8Array, hold?: Promise<void>): Promise<void> => {
    const r = await this.call(Endpoint.volumesWrite, JSON.stringify({ volume, path }), (channel) => {
      if (channel.request[0] !== ServerChannel.writeData) return channel.finish()
      void (async () => {
        channel.respond(tagged(Answer.ok, bytes))
        if (hold !== undefined) await hold
        channel.finish()
      })()
    })
    okBody(r)
  }

  volumesRead = async (volume: string, path: string): Promise<Buffer> => {
    const r = await this.call(Endpoint.volumesRead, JSON.stringify({ volume, path }))
    okBody(r)
    return Buffer.concat(r.responses.map((p) => p.subarray(1)))
  }

  /** what the program of a container this identity ran wrote on STREAM, as the server kept it (its last part) */
  output = async (id: string, stream: "stdout" | "stderr"): Promise<Buffer> => {
    const r = await this.call(Endpoint.containersOutput, JSON.stringify({ id, stream }))
    okBody(r)
    return Buffer.concat(r.responses.map((p) => p.subarray(1)))
  }

  /** any of the operations as the server answers it: the responses, raw */
  operation = (tag: number, body: object) => this.call(tag, JSON.stringify(body))

  version = async (): Promise<{ version: string; capabilities: unknown }> =>
    JSON.parse(okBody(await this.call(Endpoint.version, "{}")).toString("utf8")) as { version: string; capabilities: unknown }

  close(): void {
    this.connection.close(1000)
  }
}

export class ContainersError extends Error {}

const okBody = (r: CallResult): Buffer => {
  const first = r.responses[0]
  if (first === undefined) throw new ContainersError(r.finished ? "the server could not decode the request" : "the connection ended")
  if (first[0] === Answer.error) throw new ContainersError(first.subarray(1).toString("utf8"))
  return first.subarray(1)
}

/** connects and authorizes; the connection is ready to open scopes */
export const connect = async (url: string, token: string): Promise<ContainersClient> => {
  const socket = new WebSocket(url, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 })
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve())
    socket.once("error", reject)
  })
  const connection = new FrameConnection(socket, { role: "opener" })
  connection.sendAuth(Buffer.from(token, "utf8"))
  return new ContainersClient(connection)
}
