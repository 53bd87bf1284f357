import type { WebSocket } from "ws"
import { FrameConnection, type Channel, type PeerChannel, type Scope } from "./FrameConnection.js"
import { tagged } from "./Frames.js"
import { answerChannel, listenProxy, proxyScopes, type MountRequest, type ProxyListener } from "./proxy/ProxySide.js"
import { Answer } from "./Wire.js"

/**
 * A container proxy inside the server's (or a test's) process, speaking the container-proxy
 * layer of docs/containers.md section 10 on a loopback port or a Unix socket: what the
 * in-process deployer stands behind a deploy where no real container is wanted (the bubblewrap
 * deployer starts the C proxy, src/containers/proxy/proxy.c, in each container instead). It
 * answers as its behaviour says and keeps everything it received, so tests see the server from
 * the container's side.
 */
export interface ProxyBehaviour {
  /** the Begun's JSON (default `{"secrets":{}}`), or the whole first answer as bytes */
  readonly begun?: string | Buffer
  /** the answers to a secrets channel on the begin scope (default: Fed) */
  readonly feed?: (request: Buffer) => ReadonlyArray<Buffer> | Promise<ReadonlyArray<Buffer>>
  /** the answer to a mount scope (default: mounted) */
  readonly mount?: (request: MountRequest) => Buffer | Promise<Buffer>
  /** Begun is answered once this resolves (never: a proxy that never answers) */
  readonly beginWhen?: Promise<void>
  /** finish the begin scope right behind Begun (a program that ended at once) */
  readonly endAfterBegun?: boolean
  /** serve on this Unix socket instead of a loopback port (as part 2's relay does) */
  readonly unixSocket?: string
  /** awaited before each answer the proxy gives on its own: randomized schedules */
  readonly delay?: () => Promise<void>
  /** answer the WebSocket handshake with HTTP 403 */
  readonly refuseHandshake?: boolean
  /** start listening only once this resolves (the dial must be made again until then) */
  readonly listenWhen?: Promise<void>
}

export interface ReceivedMount {
  readonly request: MountRequest
  readonly scope: Scope
}

export class InProcessProxy {
  /** every WebSocket connection the server opened to this proxy */
  connections = 0
  /** every scope the server opened, in order: [tag, body] */
  readonly scopes: Array<{ tag: number; body: string }> = []
  /** the begin scope, once opened */
  begin: Scope | undefined
  /** the secrets channels the server opened on the begin scope, in order */
  readonly feeds: Array<PeerChannel> = []
  readonly mounts: Array<ReceivedMount> = []
  /** the tree scopes the server opened (containers::fuse_serve), and every channel on them */
  readonly trees: Array<Scope> = []
  readonly treeAsks: Array<Buffer> = []
  /** the proxy-side connection */
  connection: FrameConnection | undefined
  private listener: ProxyListener | undefined
  private beginWaiters: Array<(scope: Scope) => void> = []
  stopped = false
  /** the first answer of the begin went out */
  begunSent = false
  /** the most mount scopes the server had waiting at once */
  mostMountsAtOnce = 0
  private mountsWaiting = 0

  constructor(private readonly behaviour: ProxyBehaviour = {}) {}

  async start(): Promise<string> {
    const onConnection = (socket: WebSocket) => {
      this.connections++
      this.connection = new FrameConnection(socket, { role: "responder", onScope: (scope) => this.onScope(scope) })
    }
    const accept = () => this.behaviour.refuseHandshake !== true
    if (this.behaviour.unixSocket !== undefined) {
      this.listener = await listenProxy({ unixSocket: this.behaviour.unixSocket, accept, onConnection })
      return this.listener.url
    }
    if (this.behaviour.listenWhen === undefined) {
      this.listener = await listenProxy({ host: "127.0.0.1", accept, onConnection })
      return this.listener.url
    }
    // a port nobody listens on yet: taken, released, and listened on later
    const probe = await listenProxy({ host: "127.0.0.1", onConnection: () => {} })
    await probe.close()
    void this.behaviour.listenWhen.then(async () => {
      this.listener = await listenProxy({ host: "127.0.0.1", port: probe.port!, onConnection })
    })
    return probe.url
  }

  private async pause(): Promise<void> {
    if (this.behaviour.delay !== undefined) await this.behaviour.delay()
  }

  private onScope(scope: Scope): void {
    this.scopes.push({ tag: scope.request[0]!, body: scope.request.subarray(1).toString("utf8") })
    proxyScopes({
      begin: (begin) => void this.onBegin(begin),
      mount: (mount, request) => void this.onMount(mount, request),
      tree: (tree) => void this.onTree(tree)
    })(scope)
  }

  private async onBegin(scope: Scope): Promise<void> {
    this.begin = scope
    for (const w of this.beginWaiters) w(scope)
    this.beginWaiters = []
    scope.peerOpened.listen((channel) => void this.onFeed(channel), () => {})
    await this.pause()
    if (this.behaviour.beginWhen !== undefined) await this.behaviour.beginWhen
    const begun = this.behaviour.begun ?? `{"secrets":{}}`
    scope.respond(typeof begun === "string" ? tagged(Answer.begun, begun) : begun)
    this.begunSent = true
    if ((typeof begun !== "string" && begun[0] === Answer.error) || this.behaviour.endAfterBegun === true) scope.finish()
  }

  private async onMount(scope: Scope, request: MountRequest): Promise<void> {
    this.mountsWaiting++
    this.mostMountsAtOnce = Math.max(this.mostMountsAtOnce, this.mountsWaiting)
    await this.pause()
    const answer = (await this.behaviour.mount?.(request)) ?? tagged(Answer.ok)
    this.mountsWaiting--
    if (answer[0] === Answer.ok) this.mounts.push({ request, scope })
    scope.respond(answer)
    if (answer[0] !== Answer.ok) scope.finish()
  }

  private async onTree(scope: Scope): Promise<void> {
    this.trees.push(scope)
    scope.peerOpened.listen((channel) => {
      this.treeAsks.push(channel.request)
      if (channel.request[0] === 0) return scope.finish()
      // the container's tree answers each ask with what it was asked, marked
      answerChannel(channel, [tagged(Answer.ok, channel.request)])
    }, () => {})
    await this.pause()
    scope.respond(tagged(Answer.ok))
  }

  private async onFeed(channel: PeerChannel): Promise<void> {
    this.feeds.push(channel)
    await this.pause()
    answerChannel(channel, (await this.behaviour.feed?.(channel.request)) ?? [tagged(Answer.ok)])
  }

  /** what the proxy received and answered, for tests and logs */
  describe(): string {
    const connection = this.connection === undefined ? "none" : this.connection.isClosed ? "closed" : "open"
    return [
      `proxy connections ${this.connections} (the last ${connection})`,
      `scopes [${this.scopes.map((s) => s.tag).join(",")}]`,
      `begun sent ${this.begunSent}`,
      `feeds ${this.feeds.length}`,
      `mounts made ${this.mounts.length}, waiting ${this.mountsWaiting}`,
      `stopped ${this.stopped}`
    ].join(", ")
  }

  /** the begin scope, once the server opened it */
  beginScope(): Promise<Scope> {
    if (this.begin !== undefined) return Promise.resolve(this.begin)
    return new Promise((resolve) => this.beginWaiters.push(resolve))
  }

  /** an ask of the container's program: a channel the proxy opens on the begin scope */
  async ask(payload: Uint8Array): Promise<Channel> {
    return (await this.beginScope()).openChannel(payload)
  }

  /** an ask of a FUSE mount on its own scope */
  mountAsk(index: number, payload: Uint8Array): Channel {
    return this.mounts[index]!.scope.openChannel(payload)
  }

  async say(payload: Uint8Array): Promise<void> {
    ;(await this.beginScope()).respond(payload)
  }

  async endBegin(): Promise<void> {
    ;(await this.beginScope()).finish()
  }

  /** the container's connection ends (its program died, say) */
  drop(): void {
    this.connection?.close(1001, "the container is gone")
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.connection?.close(1001, "the container was stopped")
    await this.listener?.close(true)
  }
}
