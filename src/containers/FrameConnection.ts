import type { WebSocket } from "ws"
import { decodeFrame, empty, encodeFrame, FrameType, type Frame } from "./Frames.js"
import { StreamInbox } from "./StreamInbox.js"
import { WireSocket } from "./WebSocketWire.js"

/**
 * One WebSocket in either role of docs/containers.md section 1: the `opener` opens scopes (a
 * client toward the server, the server toward a container's proxy); the `responder` answers
 * them (the server toward a client, the proxy toward the server). Channels go both ways on
 * every scope. Payloads are never read here; a frame the peer may not send closes the
 * connection with 1002.
 */
export type Role = "opener" | "responder"

/** what arrives on a stream the other side answers: responses, then the finish (the end) */
export type Arrival = Buffer

export class Channel {
  /** the responses, ended by the finish or by the scope or connection ending */
  readonly responses = new StreamInbox<Arrival>()
  finished = false
  constructor(
    readonly scope: Scope,
    readonly number: number,
    readonly request: Buffer
  ) {}
}

/** a channel the other side opened: its one request, and what this side answers */
export class PeerChannel {
  private ended = false
  constructor(
    readonly scope: Scope,
    readonly number: number,
    readonly request: Buffer
  ) {}
  get isEnded(): boolean {
    return this.ended || this.scope.isEnded
  }
  respond(payload: Uint8Array): void {
    if (this.isEnded) return
    this.scope.connection.send(FrameType.ChannelResponse, this.scope.number, this.number, payload)
  }
  finish(): void {
    if (this.isEnded) return
    this.ended = true
    this.scope.peerChannels.delete(this.number)
    this.scope.connection.send(FrameType.ChannelResponseFinish, this.scope.number, this.number)
  }
  /** ends it without a frame: the scope's finish ends it on the wire */
  drop(): void {
    this.ended = true
    this.scope.peerChannels.delete(this.number)
  }
}

export class Scope {
  /** opener: the main stream's responses; ended by the finish */
  readonly responses = new StreamInbox<Arrival>()
  /** channels the other side opens on this scope */
  readonly peerOpened = new StreamInbox<PeerChannel>()
  readonly channels = new Map<number, Channel>()
  readonly peerChannels = new Map<number, PeerChannel>()
  lastChannel = 0
  lastPeerChannel = 0
  private ended = false
  /** called once when the scope ends, by its finish or its connection's end */
  onEnd: (() => void) | undefined
  constructor(
    readonly connection: FrameConnection,
    readonly number: number,
    readonly request: Buffer
  ) {}

  get isEnded(): boolean {
    return this.ended
  }

  openChannel(payload: Uint8Array): Channel {
    const channel = new Channel(this, ++this.lastChannel, Buffer.from(payload.buffer, payload.byteOffset, payload.length))
    if (this.ended) {
      channel.responses.end()
      return channel
    }
    this.channels.set(channel.number, channel)
    this.connection.send(FrameType.ChannelRequest, this.number, channel.number, payload)
    return channel
  }

  /** responder only */
  respond(payload: Uint8Array): void {
    if (this.ended) return
    this.connection.send(FrameType.Response, this.number, 0, payload)
  }

  /** responder only: ends the scope and every channel on it */
  finish(): void {
    if (this.ended) return
    this.connection.send(FrameType.ResponseFinish, this.number, 0)
    this.end()
  }

  /** @internal */
  end(): void {
    if (this.ended) return
    this.ended = true
    this.connection.scopes.delete(this.number)
    this.responses.end()
    this.peerOpened.end()
    for (const channel of this.channels.values()) channel.responses.end()
    this.channels.clear()
    this.peerChannels.clear()
    this.onEnd?.()
  }
}

export interface FrameConnectionOptions {
  readonly role: Role
  /** responder: a new scope; its handlers must be set before this returns */
  readonly onScope?: (scope: Scope) => void
  /** responder with auth: the first frame's payload; false closes the connection with 4401 */
  readonly onAuth?: (token: Buffer) => boolean
  /** the connection ended (closed by either side, or failed) */
  readonly onClose?: (code: number) => void
}

/** what a connection may have waiting to be written before the connections feeding it are not read */
export const highWater = 4 * 1024 * 1024

/**
 * Per-scope flow control (docs/containers.md section 1, "Flow control"): past this much waiting
 * to be written to a run's proxy, the run's scope alone is held (the server opens a hold channel
 * on it, and a go-on channel once that proxy has written what waits), so a slow proxy does not
 * stop the client's other scopes.
 */
export const scopeHighWater = 4 * 1024 * 1024

/**
 * What a run's proxy may have waiting before the client's whole connection is not read: the
 * bound of a scope whose client does not hold it when asked. Four times the scope's mark, so that
 * what a holding client had in flight when the hold reached it fits below it.
 */
export const connectionHighWater = 4 * scopeHighWater

/**
 * What a connection needs of its WebSocket. The server's own (WebSocketWire.ts: its connections,
 * whose frames it relays) writes a frame without building a message first and corks its socket;
 * `ws`'s (clients, proxies, tests) is used through its public API only.
 */
export interface MessageWire {
  readonly isOpen: boolean
  readonly bufferedAmount: number
  sendFrame(type: FrameType, scope: number, channel: number, payload: Uint8Array): void
  /** what is sent until the end of this tick goes in one write, where the socket allows */
  corkTick(): void
  whenUnder(limit: number): Promise<void>
  pause(): void
  resume(): void
  close(code: number, reason: string): void
  terminate(): void
}

const ownWire = (socket: WireSocket, onMessage: (payload: Buffer, isBinary: boolean) => void, onClose: (code: number) => void): MessageWire => {
  socket.onMessage = onMessage
  socket.onClose = onClose
  let corked = false
  const uncork = () => {
    corked = false
    socket.uncork()
  }
  return {
    get isOpen() {
      return socket.isOpen
    },
    get bufferedAmount() {
      return socket.bufferedAmount
    },
    sendFrame: (type, scope, channel, payload) => socket.sendFrame(type, scope, channel, payload),
    corkTick: () => {
      // the frames a relay sends for one read of its peer's socket (often several) leave in one
      // system call, right after that read's handling, instead of one call each
      if (corked) return
      corked = true
      socket.cork()
      process.nextTick(uncork)
    },
    whenUnder: (limit) => socket.whenUnder(limit),
    pause: () => socket.pause(),
    resume: () => socket.resume(),
    close: (code, reason) => socket.close(code, reason),
    terminate: () => socket.terminate()
  }
}

const wsWire = (socket: WebSocket, onMessage: (payload: Buffer, isBinary: boolean) => void, onClose: (code: number) => void): MessageWire => {
  socket.binaryType = "nodebuffer"
  socket.on("message", (data, isBinary) => onMessage(data as Buffer, isBinary))
  socket.on("close", (code) => onClose(code))
  socket.on("error", () => onClose(1006))
  // ws says when a message was written only through send's callback: each send gives one, which
  // sees whether what waits has gone under a limit someone waits for
  const waiting: Array<{ readonly limit: number; readonly resolve: () => void }> = []
  const written = () => {
    if (waiting.length === 0) return
    for (let i = waiting.length - 1; i >= 0; i--) {
      if (socket.readyState !== socket.OPEN || socket.bufferedAmount < waiting[i]!.limit) waiting.splice(i, 1)[0]!.resolve()
    }
  }
  socket.on("close", () => {
    for (const w of waiting.splice(0)) w.resolve()
  })
  return {
    get isOpen() {
      return socket.readyState === socket.OPEN
    },
    get bufferedAmount() {
      return socket.bufferedAmount
    },
    sendFrame: (type, scope, channel, payload) => socket.send(encodeFrame(type, scope, channel, payload), { binary: true }, written),
    corkTick: () => {},
    whenUnder: (limit) =>
      socket.readyState !== socket.OPEN || socket.bufferedAmount < limit ? Promise.resolve() : new Promise((resolve) => waiting.push({ limit, resolve })),
    pause: () => socket.pause(),
    resume: () => socket.resume(),
    close: (code, reason) => socket.close(code, reason),
    terminate: () => socket.terminate()
  }
}

/**
 * A wire of another carrier than a WebSocket: the container proxy's FUSE side takes its frames
 * from the C proxy over a socket pair (src/containers/proxy/StreamWire.ts). It is given the
 * connection's two callbacks and gives the wire.
 */
export interface AttachableWire {
  attach(onMessage: (payload: Buffer, isBinary: boolean) => void, onClose: (code: number) => void): MessageWire
}

export class FrameConnection {
  readonly scopes = new Map<number, Scope>()
  /** connections not read until this one drains */
  private readonly waiting = new Set<FrameConnection>()
  private holds = 0
  private lastScope = 0
  private authed: boolean
  private closed = false
  private readonly wire: MessageWire

  /** the WebSocket it runs on (for an AttachableWire, that wire: read by nothing of its one user, the FUSE side) */
  readonly socket: WebSocket | WireSocket

  constructor(
    carrier: WebSocket | WireSocket | AttachableWire,
    private readonly options: FrameConnectionOptions
  ) {
    this.socket = carrier as WebSocket | WireSocket
    const socket = carrier
    this.authed = options.onAuth === undefined
    const onMessage = (payload: Buffer, isBinary: boolean) => {
      if (this.closed) return
      if (!isBinary) return this.close(1003, "frames are binary messages")
      this.receive(payload)
    }
    const onClose = (code: number) => this.ended(code)
    this.wire =
      socket instanceof WireSocket
        ? ownWire(socket, onMessage, onClose)
        : "attach" in socket
          ? socket.attach(onMessage, onClose)
          : wsWire(socket, onMessage, onClose)
  }

  /** whether its frames are read and written by the server's own framing (WebSocketWire.ts), not through ws */
  get isDirect(): boolean {
    return this.socket instanceof WireSocket
  }

  get isClosed(): boolean {
    return this.closed
  }

  /** opener: opens a scope with its request */
  openScope(payload: Uint8Array): Scope {
    const scope = new Scope(this, ++this.lastScope, Buffer.from(payload.buffer, payload.byteOffset, payload.length))
    if (this.closed) {
      scope.end()
      return scope
    }
    this.scopes.set(scope.number, scope)
    this.send(FrameType.Request, scope.number, 0, payload)
    return scope
  }

  sendAuth(token: Uint8Array): void {
    this.send(FrameType.Auth, 0, 0, token)
  }

  send(type: FrameType, scope: number, channel: number, payload?: Uint8Array): void {
    if (this.closed || !this.wire.isOpen) return
    this.wire.corkTick()
    this.wire.sendFrame(type, scope, channel, payload ?? empty)
  }

  /**
   * Flow control of a relay: after sending on this connection what SOURCE sent, past the
   * high-water mark SOURCE is not read until this one has written what waits. Nothing is
   * dropped and nothing is timed out: the sender's own TCP window holds the rest.
   */
  throttle(source: FrameConnection, limit = highWater): void {
    if (source === this || this.closed || this.wire.bufferedAmount < limit || this.waiting.has(source)) return
    this.waiting.add(source)
    source.hold()
    if (this.waiting.size === 1) void this.whenDrained().then(() => {
      for (const s of this.waiting) s.release()
      this.waiting.clear()
    })
  }

  /** resolves once what waits to be written is under the high-water mark (or the connection closed) */
  whenDrained(): Promise<void> {
    return this.whenUnder(highWater)
  }

  /** resolves once what waits to be written is under LIMIT bytes (or the connection closed) */
  whenUnder(limit: number): Promise<void> {
    if (this.closed) return Promise.resolve()
    return this.wire.whenUnder(limit)
  }

  /** what waits to be written on this connection */
  get bufferedAmount(): number {
    return this.closed ? 0 : this.wire.bufferedAmount
  }

  /** whether this connection is not being read, held back by flow control */
  get isHeld(): boolean {
    return this.holds > 0
  }

  private hold(): void {
    if (this.holds++ === 0) this.wire.pause()
  }

  private release(): void {
    if (--this.holds === 0 && !this.closed) this.wire.resume()
  }

  close(code = 1000, reason = ""): void {
    if (this.closed) return
    try {
      this.wire.close(code, reason)
    } catch {
      this.wire.terminate()
    }
    this.ended(code)
  }

  /** the WebSocket close status, once closed (4401: the token was not accepted) */
  closeCode: number | undefined

  private ended(code: number): void {
    if (this.closed) return
    this.closed = true
    this.closeCode = code
    for (const scope of [...this.scopes.values()]) scope.end()
    this.options.onClose?.(code)
  }

  private receive(message: Buffer): void {
    const frame = decodeFrame(message)
    if (frame === undefined) return this.close(1002, "not a frame")
    if (!this.authed) {
      if (frame.type !== FrameType.Auth) return this.close(1002, "the first frame is Auth")
      this.authed = true
      if (!this.options.onAuth!(frame.payload)) this.close(4401, "unauthorized")
      return
    }
    const problem = this.dispatch(frame)
    if (problem !== undefined) this.close(1002, problem)
  }

  private dispatch(frame: Frame): string | undefined {
    const opener = this.options.role === "opener"
    switch (frame.type) {
      case FrameType.Auth:
        return "a second Auth"
      case FrameType.Request: {
        if (opener) return "a Request to the opener"
        if (frame.channel !== 0 || frame.scope <= this.lastScope) return "a scope number not greater than the last"
        this.lastScope = frame.scope
        const scope = new Scope(this, frame.scope, frame.payload)
        this.scopes.set(scope.number, scope)
        this.options.onScope?.(scope)
        return undefined
      }
      case FrameType.Response:
      case FrameType.ResponseFinish: {
        if (!opener) return "a Response to the responder"
        if (frame.channel !== 0) return "a Response on a channel"
        const scope = this.scopes.get(frame.scope)
        if (scope === undefined) return frame.scope <= this.lastScope && frame.scope > 0 ? "a Response after the finish" : "a Response for no scope"
        if (frame.type === FrameType.Response) scope.responses.push(frame.payload)
        else scope.end()
        return undefined
      }
      case FrameType.ChannelRequest: {
        const scope = this.scopes.get(frame.scope)
        if (scope === undefined) return this.gone(frame.scope) ? undefined : "a channel on no scope"
        if (frame.channel <= scope.lastPeerChannel) return "a channel number not greater than the last"
        scope.lastPeerChannel = frame.channel
        const channel = new PeerChannel(scope, frame.channel, frame.payload)
        scope.peerChannels.set(channel.number, channel)
        scope.peerOpened.push(channel)
        return undefined
      }
      case FrameType.ChannelResponse:
      case FrameType.ChannelResponseFinish: {
        const scope = this.scopes.get(frame.scope)
        if (scope === undefined) return this.gone(frame.scope) ? undefined : "a channel response on no scope"
        const channel = scope.channels.get(frame.channel)
        if (channel === undefined) {
          return frame.channel > 0 && frame.channel <= scope.lastChannel ? undefined : "a response for a channel not opened"
        }
        if (frame.type === FrameType.ChannelResponse) channel.responses.push(frame.payload)
        else {
          scope.channels.delete(channel.number)
          channel.finished = true
          channel.responses.end()
        }
        return undefined
      }
    }
  }

  /** a scope that was open and has ended: what the peer sent for it crossed its finish */
  private gone(scope: number): boolean {
    return scope > 0 && scope <= this.lastScope
  }
}
