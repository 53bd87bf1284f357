import * as Crypto from "node:crypto"
import type { Deployment, ResolvedMount } from "../../services/Deployer.js"
import type { ClientImages, ObtainedImage } from "../../services/ImageSource.js"
import { connectionHighWater, FrameConnection, scopeHighWater, type Channel, type PeerChannel, type Scope } from "./FrameConnection.js"
import { tagged } from "./Frames.js"
import { memberText } from "./VerbatimMember.js"
import { KeptOutput } from "./ProgramOutput.js"
import { dialProxy } from "./ProxyDial.js"
import { decodeRunRequest, mountPathsProblem, refusal, type FuseMount, type RunRequest } from "./RunRequest.js"
import type { ServerParts } from "./ServerParts.js"
import type { RunHold } from "./VolumeHolds.js"
import { VolumeError } from "./VolumeStore.js"
import { Answer, ClientChannel, errorAnswer, okAnswer, ProxyChannel, ProxyScope, ServerChannel, volumeRefusalAnswer } from "./Wire.js"

/**
 * `containers::tools::run` (seed 004; docs/containers.md section 9) as an explicit state
 * machine, one instance per scope. Every step is the seed's, in its order; `state` says where
 * the run is, and every way out goes through `end`, which stops the container, gives back
 * every hold and sends the finish. Nothing is timed out: every wait ends when what it waits
 * for comes, or when the client's connection ends.
 */
export type RunState =
  | "decoding"
  | "refusing"
  | "holding"
  | "obtaining"
  | "deploying"
  | "connecting"
  | "beginning"
  | "registering-and-mounting"
  | "running"
  | "ending"
  | "ended"

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** what each await of the run resolves to when the client's connection ended meanwhile */
const gone = Symbol("gone")

export class ContainerRun {
  state: RunState = "decoding"
  private request: RunRequest | undefined
  private hold: RunHold | undefined
  private deployment: Deployment | undefined
  /** the program's stdout and stderr, kept from the deploy on (ProgramOutput.ts) */
  private output: KeptOutput | undefined
  private proxy: FrameConnection | undefined
  private begin: Scope | undefined
  private id: string | undefined
  private readonly mountScopes: Array<Scope> = []
  /** paths and ids of every mount, those a fuse-mount channel is making included */
  private readonly mountPaths: Array<string> = []
  private readonly mountIds = new Set<string>()
  private readonly clientGone: Promise<typeof gone>
  private ending: Promise<void> | undefined
  private markFinished!: () => void
  /** resolves once the run ended: container stopped, holds given back, finish sent */
  readonly finished = new Promise<void>((resolve) => (this.markFinished = resolve))
  private idSent = false
  /** true once the last FUSE mount is complete and the run goes on; false when it ended first */
  private mountedResolve!: (mounted: boolean) => void
  private readonly mounted = new Promise<boolean>((resolve) => (this.mountedResolve = resolve))

  constructor(
    private readonly parts: ServerParts,
    private readonly identity: string,
    private readonly scope: Scope
  ) {
    this.clientGone = new Promise((resolve) => {
      scope.onEnd = () => {
        resolve(gone)
        // the client's connection ended (the server's own finish comes only from `end`)
        void this.end()
      }
    })
  }

  /** the run's two connections, for tests and logs */
  get connections(): { readonly client: FrameConnection; readonly proxy: FrameConnection | undefined } {
    return { client: this.scope.connection, proxy: this.proxy }
  }

  /** where the run is, for tests and logs (what a run that does not end waits for) */
  describe(): string {
    const proxy = this.proxy === undefined ? "none" : this.proxy.isClosed ? "closed" : this.proxy.isHeld ? "held" : "open"
    const client = this.scope.connection.isClosed ? "closed" : this.scope.connection.isHeld ? "held" : "open"
    return [
      `state ${this.state}`,
      `id ${this.id === undefined ? "none" : this.idSent ? "sent" : "minted"}`,
      `scope ${this.scope.isEnded ? "ended" : "open"}`,
      `client connection ${client}`,
      `proxy connection ${proxy}`,
      `begin ${this.begin === undefined ? "none" : this.begin.isEnded ? "ended" : `open, ${this.begin.channels.size} of its channels unfinished`}`,
      `mounts made ${this.mountScopes.length}`,
      `scope ${this.scopeHeld ? "held" : "not held"} for its proxy`,
      `ending ${this.ending !== undefined}`
    ].join(", ")
  }

  private until<A>(p: Promise<A>): Promise<A | typeof gone> {
    return Promise.race([p, this.clientGone])
  }

  /** runs the scope to its end */
  async run(): Promise<void> {
    try {
      await this.steps()
    } catch (e) {
      await this.fail(`the server failed: ${e instanceof Error ? e.message : String(e)}`)
    }
  }

  private async steps(): Promise<void> {
    // 1. decode
    const request = decodeRunRequest(this.scope.request)
    if (request === undefined) return this.end()
    this.request = request

    // 2. the refusals of the error kind
    this.state = "refusing"
    const listing = this.parts.volumes.list(this.identity)
    const willSupply = await this.until(this.parts.images.willSupply(this.identity, request.image))
    if (willSupply === gone) return
    const refused = refusal(request, new Set(listing.map((v) => v.name)), !willSupply)
    if (refused !== undefined) return this.fail(refused)

    // 3. the per-volume decisions, holding every volume in the same step
    this.state = "holding"
    const modes = new Map(listing.map((v) => [v.name, v.mode]))
    const held = this.parts.holds.holdForRun(this.identity, request.volumeMounts, (name) => modes.get(name)!)
    if ("byte" in held) {
      this.scope.respond(volumeRefusalAnswer(held.byte, held.name, held.byte === 5 ? held.mode : undefined))
      return this.end()
    }
    this.hold = held
    if (this.scope.isEnded) return this.end()
    for (const m of [...request.volumeMounts, ...request.fuseFileMounts, ...request.fuseDirectoryMounts]) {
      this.mountPaths.push(m.containerPath)
    }
    for (const m of [...request.fuseFileMounts, ...request.fuseDirectoryMounts]) this.mountIds.add(m.id)

    // 4. obtain the image
    this.state = "obtaining"
    const image = await this.until(this.parts.images.obtain(this.identity, request.image, this.clientImages()))
    if (image === gone) return
    if (typeof image === "string") return this.fail(image)

    // 5. deploy, every volume mount resolved under the connection's identity
    this.state = "deploying"
    let mounts: Array<ResolvedMount>
    try {
      mounts = request.volumeMounts.map((m) => ({
        hostPath: this.parts.volumes.resolve(this.identity, m.volumeName, m.volumeRelativePath),
        containerPath: m.containerPath,
        readOnly: m.mode === "read_only"
      }))
    } catch (e) {
      if (e instanceof VolumeError) return this.fail(e.message)
      throw e
    }
    const deployed = await this.parts.deploy({ identity: this.identity, image: image as ObtainedImage, memory: request.memory, disk: request.disk, mounts })
    if (typeof deployed === "string") return this.fail(`the deploy did not complete: ${deployed}`)
    if (this.ending !== undefined) return this.parts.stopDeployment(deployed)
    this.deployment = deployed
    if (this.parts.root !== undefined) this.output = KeptOutput.of(this.parts.root, this.identity, deployed)

    // 6. exactly one connection to the proxy, and the begin scope first on it
    this.state = "connecting"
    const socket = await dialProxy(deployed.proxyUrl, () => this.scope.isEnded)
    if (typeof socket === "string") return this.fail(socket)
    if (this.scope.isEnded) {
      socket.terminate()
      return this.end()
    }
    const proxy = new FrameConnection(socket, { role: "opener", onClose: () => void this.proxyEnded() })
    this.proxy = proxy
    this.state = "beginning"
    const argumentsText = request.argumentsText
    const begin = proxy.openScope(tagged(ProxyScope.begin, `{"template":${request.templateText},"arguments":${argumentsText}}`))
    this.begin = begin
    const begun = await this.until(begin.responses.take())
    if (begun === gone) return
    if (begun === undefined) return this.fail("the proxy ended the begin without Begun")
    if (begun[0] === Answer.error) return this.fail(`the proxy answered the begin with an error: ${begun.subarray(1).toString("utf8")}`)
    const read = begun[0] === Answer.begun ? readBegun(begun.subarray(1)) : "the proxy answered the begin with something other than Begun"
    if (typeof read === "string") return this.fail(read)
    const declaration = read.declaration

    // 7. the id first, entered among the running; then registration beside the FUSE mounts
    this.state = "registering-and-mounting"
    const id = this.parts.running.mint(() => Crypto.randomBytes(32).toString("base64url"))
    this.id = id
    this.output?.named(id)
    this.parts.running.enter({ id, identity: this.identity, serveTree: (scope) => void this.serveTree(scope) })
    // The begin answered Begun, so the container is registered and gets its id even when its
    // program has ended meanwhile (a /bin/true ends before the server reads Begun): the begin's
    // end, and the error it carries, wait in the begin's inbox and are relayed after the id
    // (seed 004 step 7 and the conduit). Only the proxy's connection ending is the run's error.
    const settled = await this.until(Promise.all([this.register(id, declaration), this.mountAll(request)]))
    if (settled === gone) return
    const [registration, mounting] = settled
    if (registration !== undefined) return this.fail(registration)
    if (mounting !== undefined) return this.fail(mounting)
    if (this.scope.isEnded) return this.end()
    if (proxy.isClosed) return this.fail("the proxy's connection ended before the container was registered")
    this.mountedResolve(true)

    // 8. exactly one id
    this.state = "running"
    this.scope.respond(tagged(Answer.id, id))
    this.idSent = true

    // 9. serve: what waited first, in its order, then everything as it comes
    begin.responses.listen(
      (payload) => this.relayBegin(payload),
      () => void this.end()
    )
    begin.peerOpened.listen((channel) => this.relayProxyChannel(channel), () => {})
    for (const mount of this.mountScopes) this.relayMountAsks(mount)
    this.scope.peerOpened.listen((channel) => this.serveClientChannel(channel), () => {})
  }

  /** registration and its feed: undefined when done, else the run's error */
  private async register(id: string, declaration: string): Promise<string | undefined> {
    const names = Object.keys(JSON.parse(declaration) as Record<string, unknown>)
    if (names.length === 0) return undefined
    const channel = this.scope.openChannel(tagged(ServerChannel.registration, `{"id":${JSON.stringify(id)},"secrets":${declaration}}`))
    const answers = await readAll(channel)
    if (answers === undefined) return "the client did not finish the registration channel"
    if (answers.length === 0) return "the client answered the registration with nothing"
    const error = answers.find((a) => a[0] === Answer.error)
    if (error !== undefined) return `the client refused the registration: ${error.subarray(1).toString("utf8")}`
    const deploy = answers.find((a) => a[0] === Answer.deploy)
    if (deploy === undefined) return undefined
    // exactly one secrets channel on the begin scope, the values as the client sent them
    const begin = this.begin!
    const feed = await readAll(begin.openChannel(tagged(ProxyChannel.secrets, deploy.subarray(1))))
    // the program ended before it was fed (its begin ended, the proxy's connection stands): nothing
    // is left to feed, and its end is relayed after the id
    if (feed === undefined && begin.isEnded && !this.proxy!.isClosed) return undefined
    if (feed === undefined) return "the proxy did not finish the secrets feed"
    if (feed.length === 0) return "the proxy answered the secrets feed with nothing"
    const fedError = feed.find((a) => a[0] === Answer.error)
    if (fedError !== undefined) return `the proxy refused the secrets: ${fedError.subarray(1).toString("utf8")}`
    if (feed[0]![0] !== Answer.ok) return "the proxy did not answer the secrets feed with Fed"
    return undefined
  }

  /** the FUSE mounts, file mounts first, each answered before the next */
  private async mountAll(request: RunRequest): Promise<string | undefined> {
    const all: Array<[FuseMount, "file" | "directory"]> = [
      ...request.fuseFileMounts.map((m) => [m, "file"] as [FuseMount, "file"]),
      ...request.fuseDirectoryMounts.map((m) => [m, "directory"] as [FuseMount, "directory"])
    ]
    for (const [mount, kind] of all) {
      const problem = await this.mount(mount, kind)
      if (problem !== undefined) return problem
    }
    return undefined
  }

  private async mount(mount: FuseMount, kind: "file" | "directory"): Promise<string | undefined> {
    const scope = this.proxy!.openScope(tagged(ProxyScope.mount, JSON.stringify({ id: mount.id, path: mount.containerPath, kind })))
    const answer = await scope.responses.take()
    if (answer === undefined) return `the proxy did not make the ${kind} mount ${JSON.stringify(mount.id)}`
    if (answer[0] !== Answer.ok) {
      return `the proxy did not make the ${kind} mount ${JSON.stringify(mount.id)}: ${answer.subarray(1).toString("utf8")}`
    }
    this.mountScopes.push(scope)
    return undefined
  }

  private relayBegin(payload: Buffer): void {
    const kind = payload[0]
    if (kind === Answer.active || kind === Answer.inactive) {
      this.scope.respond(payload)
      return this.toClient()
    }
    if (kind === Answer.error) {
      // the one error after the id: the proxy's, relayed; then the run ends
      this.scope.respond(payload)
      void this.end()
    }
  }

  /** a channel the proxy opened on the begin scope: relayed to the client as a server channel */
  private relayProxyChannel(channel: PeerChannel): void {
    const out = this.scope.openChannel(channel.request)
    this.toClient()
    out.responses.listen(
      (payload) => {
        channel.respond(payload)
        this.toProxy()
      },
      () => (out.finished ? channel.finish() : channel.drop())
    )
  }

  /** what the proxy sent was relayed to the client: the proxy is not read while the client is behind */
  private toClient(): void {
    if (this.proxy !== undefined) this.scope.connection.throttle(this.proxy)
  }

  /**
   * And the other way, per scope: the proxy's connection is this run's own, so what waits on it is
   * this scope's buffer. Past the scope's mark the client is asked to hold this scope; only past
   * the connection's bound (a client that does not hold it) is the client's whole connection not
   * read, as before (docs/containers.md section 1, "Flow control").
   */
  private toProxy(): void {
    const proxy = this.proxy
    if (proxy === undefined) return
    if (!this.scopeHeld && proxy.bufferedAmount >= scopeHighWater) this.holdScope(proxy)
    proxy.throttle(this.scope.connection, connectionHighWater)
  }

  /** whether the client was asked to hold this scope and not yet to go on */
  private scopeHeld = false

  /** the hold channel now, the go-on channel once the proxy has written what waits for it */
  private holdScope(proxy: FrameConnection): void {
    this.scopeHeld = true
    this.scope.openChannel(tagged(ServerChannel.hold))
    void proxy.whenUnder(scopeHighWater).then(() => {
      this.scopeHeld = false
      if (!this.scope.isEnded && !proxy.isClosed) this.scope.openChannel(tagged(ServerChannel.goOn))
    })
  }

  private relayMountAsks(mount: Scope): void {
    mount.peerOpened.listen((channel) => this.relayProxyChannel(channel), () => {})
  }

  private serveClientChannel(channel: PeerChannel): void {
    const tag = channel.request[0]
    const body = channel.request.subarray(1)
    if (tag === ClientChannel.stop && body.length === 0) return void this.end()
    if (tag === ClientChannel.secrets && isJsonObject(body)) {
      const out = this.begin!.openChannel(channel.request)
      this.toProxy()
      out.responses.listen(
        (payload) => {
          channel.respond(payload)
          this.toClient()
        },
        () => (out.finished ? channel.finish() : channel.drop())
      )
      return
    }
    if (tag === ClientChannel.fuseMount) {
      const asked = decodeFuseMountAsk(body)
      if (asked !== undefined) return void this.fuseMountChannel(channel, asked)
    }
    channel.finish()
  }

  private async fuseMountChannel(channel: PeerChannel, asked: FuseMount & { kind: "file" | "directory" }): Promise<void> {
    const problem = this.mountIds.has(asked.id)
      ? `a FUSE mount has the id ${JSON.stringify(asked.id)}`
      : mountPathsProblem([...this.mountPaths, asked.containerPath])
    if (problem !== undefined) {
      channel.respond(errorAnswer(problem))
      return channel.finish()
    }
    this.mountIds.add(asked.id)
    this.mountPaths.push(asked.containerPath)
    const failed = await this.mount(asked, asked.kind)
    if (failed !== undefined) {
      this.mountIds.delete(asked.id)
      this.mountPaths.splice(this.mountPaths.indexOf(asked.containerPath), 1)
      channel.respond(errorAnswer(failed))
      return channel.finish()
    }
    this.relayMountAsks(this.mountScopes[this.mountScopes.length - 1]!)
    channel.respond(okAnswer())
    channel.finish()
  }

  /**
   * containers::fuse_serve naming this container (docs/containers.md section 3): one tree scope
   * on the proxy's connection, opened only once the last FUSE mount is complete; the client's
   * channels on its scope are relayed to it verbatim, and its stop channel ends it.
   */
  private async serveTree(scope: Scope): Promise<void> {
    const fail = (message: string) => {
      scope.respond(errorAnswer(message))
      scope.finish()
    }
    const ready = await Promise.race([this.mounted, new Promise<false>((resolve) => (scope.onEnd = () => resolve(false)))])
    if (scope.isEnded) return
    if (!ready || this.proxy === undefined || this.ending !== undefined) return fail("the container is not running")
    const tree = this.proxy.openScope(tagged(ProxyScope.tree, "{}"))
    scope.onEnd = () => {
      // the client's connection ended: the proxy is told to stop serving the tree
      if (!tree.isEnded) tree.openChannel(tagged(ProxyChannel.stopTree))
    }
    const answer = await tree.responses.take()
    if (scope.isEnded) return
    if (answer === undefined || answer[0] !== Answer.ok) {
      return fail(`the proxy did not serve the container's tree${answer !== undefined ? `: ${answer.subarray(1).toString("utf8")}` : ""}`)
    }
    scope.respond(okAnswer())
    tree.responses.listen(() => {}, () => scope.finish())
    scope.peerOpened.listen((channel) => {
      if (channel.request[0] === ClientChannel.stop) {
        if (!tree.isEnded) tree.openChannel(tagged(ProxyChannel.stopTree))
        return scope.finish()
      }
      const out = tree.openChannel(channel.request)
      // a tree's asks are small; only past the connection's bound is the client held for them
      this.proxy?.throttle(scope.connection, connectionHighWater)
      out.responses.listen(
        (payload) => {
          channel.respond(payload)
          if (this.proxy !== undefined) scope.connection.throttle(this.proxy)
        },
        () => (out.finished ? channel.finish() : channel.drop())
      )
    }, () => {})
  }

  private clientImages(): ClientImages {
    const ask = (tag: number, body: unknown) => readAll(this.scope.openChannel(tagged(tag, JSON.stringify(body))))
    const bytes = async (tag: number, repository: string, digest: string) => {
      const answers = await ask(tag, { repository, digest })
      if (answers === undefined || answers.length === 0 || answers.some((a) => a[0] !== Answer.ok)) return undefined
      return Buffer.concat(answers.map((a) => a.subarray(1)))
    }
    return {
      has: async (digest) => {
        const answers = await ask(ServerChannel.ociHas, { digest })
        const first = answers?.[0]
        if (first === undefined || first[0] !== Answer.ok) return undefined
        return first.subarray(1).toString("utf8")
      },
      manifest: (repository, digest) => bytes(ServerChannel.ociManifest, repository, digest),
      blob: async (repository, digest, write) => {
        // each piece handed on as it comes: a layer is never held whole in memory
        const channel = this.scope.openChannel(tagged(ServerChannel.ociBlob, JSON.stringify({ repository, digest })))
        let pieces = 0
        let failed = false
        let taking = true
        for (;;) {
          const payload = await channel.responses.take()
          if (payload === undefined) return channel.finished && pieces > 0 && !failed
          pieces++
          if (payload[0] !== Answer.ok) failed = true
          else if (taking) taking = write(payload.subarray(1))
        }
      }
    }
  }

  /** before the id, each wait on the proxy sees its end for itself and fails the run */
  private proxyEnded(): void {
    if (this.idSent) void this.end()
  }

  /** the run's error: one error response, then the end */
  private async fail(message: string): Promise<void> {
    // after the id the server sends no error of its own
    if (!this.idSent && this.ending === undefined) this.scope.respond(errorAnswer(message))
    return this.end()
  }

  /** stop the container, end every channel task, give back every hold, send the finish; once */
  end(): Promise<void> {
    if (this.ending !== undefined) return this.ending
    this.state = "ending"
    this.ending = (async () => {
      // nothing before this await: what `end` sets off (the proxy's close) may call `end` again
      await null
      this.mountedResolve(false)
      this.proxy?.close(1000, "the run ended")
      if (this.deployment !== undefined) await this.parts.stopDeployment(this.deployment)
      // the container stopped, every writer of its output is gone: what it printed is kept before the finish
      await this.output?.ended
      if (this.id !== undefined) this.parts.running.leave(this.id)
      // a run whose id was never sent: nobody can ask for what its program printed
      if (!this.idSent) this.output?.forget()
      this.hold?.release()
      this.scope.finish()
      this.state = "ended"
      this.markFinished()
    })()
    return this.ending
  }
}

/** a channel's responses to its finish; undefined when it ended without one (the scope or connection ended) */
const readAll = async (channel: Channel): Promise<Array<Buffer> | undefined> => {
  const out: Array<Buffer> = []
  for (;;) {
    const payload = await channel.responses.take()
    if (payload === undefined) return channel.finished ? out : undefined
    out.push(payload)
  }
}

/** the secrets declaration of a Begun (its exact text), or what is wrong with it */
const readBegun = (body: Buffer): { readonly declaration: string } | string => {
  let text: string
  let begun: unknown
  try {
    text = utf8.decode(body)
    begun = JSON.parse(text)
  } catch {
    return "the proxy's Begun is not JSON"
  }
  if (typeof begun !== "object" || begun === null || Array.isArray(begun)) return "the proxy's Begun is not an object"
  const b = begun as Record<string, unknown>
  const secrets = b.secrets ?? {}
  if (typeof secrets !== "object" || secrets === null || Array.isArray(secrets)) return "the proxy's Begun declares secrets that are not an object"
  if (Array.isArray(b.dependencies) ? b.dependencies.length > 0 : b.dependencies !== undefined && b.dependencies !== null) {
    return "the proxy's Begun declares dependencies, and a tool container declares none"
  }
  return { declaration: memberText(text, "secrets") ?? "{}" }
}

const isJsonObject = (body: Buffer): boolean => {
  try {
    const v = JSON.parse(utf8.decode(body)) as unknown
    return typeof v === "object" && v !== null && !Array.isArray(v)
  } catch {
    return false
  }
}

const decodeFuseMountAsk = (body: Buffer): (FuseMount & { kind: "file" | "directory" }) | undefined => {
  try {
    const v = JSON.parse(utf8.decode(body)) as Record<string, unknown>
    if (typeof v !== "object" || v === null || Object.keys(v).some((k) => !["id", "container_path", "kind"].includes(k))) return undefined
    if (typeof v.id !== "string" || v.id === "" || typeof v.container_path !== "string" || !v.container_path.startsWith("/")) return undefined
    if (v.kind !== "file" && v.kind !== "directory") return undefined
    return { id: v.id, containerPath: v.container_path, kind: v.kind }
  } catch {
    return undefined
  }
}
