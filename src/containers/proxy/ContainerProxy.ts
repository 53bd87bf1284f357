import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { WebSocket } from "ws"
import { FrameConnection, type PeerChannel, type Scope } from "../FrameConnection.js"
import { tagged } from "../Frames.js"
import { Answer, ProxyChannel } from "../Wire.js"
import type { MountFuse } from "./Fuse.js"
import { envRecord, programPort, proxyPort, type Launch } from "./Launch.js"
import { answerChannel, listenProxy, proxyScopes, refuseScope, type MountRequest } from "./ProxySide.js"

/**
 * The container proxy (docs/containers.md section 10, "The proxy inside a container"): the
 * program the deployer starts in every container. It listens on port 14979 for the server's one
 * WebSocket and, once that is accepted, stops listening (nothing else in the container can then
 * reach it) and starts the image's program beside itself with the image's environment only. It
 * answers tools::begin with Begun carrying the program's declaration, feeds the secrets, says
 * Active and Inactive as the program's asks come and go, makes FUSE mounts through a FUSE module,
 * and serves the program on the container's own loopback (`programPort`):
 *
 *   GET  /begin          {"template","arguments"} as the server sent them (waits for the begin)
 *   GET  /secrets        the values last fed, verbatim (waits for the first feed; `{}` when the
 *                        program takes none)
 *   PUT  /rotating       the rotating secrets (a JSON object) handed back with the next Inactive
 *   POST /ask/TAG        an ask of the client (TAG 16 to 255, the body its bytes): each answer
 *                        as [length u32 BE][bytes], the response ending at the channel's finish
 */
export interface ContainerProxyOptions {
  readonly launch: Launch
  readonly mountFuse: MountFuse
  /** how many processes of the container the kernel ended out of memory, where the deployer shows it */
  readonly oomKills?: () => number | undefined
  readonly port?: number
  readonly programPort?: number
  readonly log?: (line: string) => void
}

interface Waiting<T> {
  value: T | undefined
  readonly waiters: Array<(value: T) => void>
}

const waiting = <T>(): Waiting<T> => ({ value: undefined, waiters: [] })
const settle = <T>(w: Waiting<T>, value: T) => {
  w.value = value
  for (const f of w.waiters.splice(0)) f(value)
}
const valueOf = <T>(w: Waiting<T>): Promise<T> =>
  w.value !== undefined ? Promise.resolve(w.value) : new Promise((resolve) => w.waiters.push(resolve))

const isJsonObject = (bytes: Buffer): boolean => {
  try {
    const v = JSON.parse(bytes.toString("utf8")) as unknown
    return typeof v === "object" && v !== null && !Array.isArray(v)
  } catch {
    return false
  }
}

/** why a spawn failed: Node names the program for a working directory that is missing, so that is said first */
const startProblem = (e: Error, workingDir: string): string => {
  if ((e as NodeJS.ErrnoException).code !== "ENOENT") return e.message
  try {
    if (Fs.statSync(workingDir).isDirectory()) return e.message
    return `its working directory ${workingDir} is not a directory (${e.message})`
  } catch {
    return `its working directory ${workingDir} does not exist (${e.message})`
  }
}

const closeQuietly = (fd: number): void => {
  try {
    Fs.closeSync(fd)
  } catch {
    // closed already
  }
}

const readBody = (request: Http.IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    request.on("data", (c: Buffer) => chunks.push(c))
    request.on("end", () => resolve(Buffer.concat(chunks)))
    request.on("error", reject)
  })

export class ContainerProxy {
  private connection: FrameConnection | undefined
  private begin: Scope | undefined
  private readonly begun = waiting<Buffer>()
  private readonly secrets = waiting<Buffer>()
  private rotating: Buffer = Buffer.from("{}")
  private inFlight = 0
  /** how the program ended: undefined for a clean exit, else why */
  private ended: { readonly error: string | undefined } | undefined
  private program: ChildProcess.ChildProcess | undefined
  private readonly unmounts: Array<() => Promise<void>> = []

  constructor(private readonly options: ContainerProxyOptions) {}

  private log(line: string): void {
    this.options.log?.(`ocx2-container-proxy: ${line}`)
  }

  /** listens for the program, then for the server; resolves once the server's connection ended */
  async run(): Promise<void> {
    const api = Http.createServer((request, response) => void this.serveProgram(request, response))
    await new Promise<void>((resolve) => api.listen(this.options.programPort ?? programPort, "127.0.0.1", resolve))
    let closed!: () => void
    const done = new Promise<void>((resolve) => (closed = resolve))
    const listener = await listenProxy({
      port: this.options.port ?? proxyPort,
      // the server's one connection: a second never gets past the handshake
      accept: () => this.connection === undefined,
      onConnection: (socket: WebSocket) => {
        if (this.connection !== undefined) return socket.terminate()
        this.connection = new FrameConnection(socket, {
          role: "responder",
          onScope: proxyScopes({
            begin: (scope, body) => this.onBegin(scope, body),
            mount: (scope, request) => void this.onMount(scope, request),
            tree: (scope) => refuseScope(scope, "this proxy serves no tree: FUSE is not available in it yet")
          }),
          onClose: () => closed()
        })
        void listener.close()
        this.startProgram()
      }
    })
    this.log(`listening on ${listener.url}`)
    await done
    for (const unmount of this.unmounts.splice(0)) await unmount().catch(() => {})
    this.program?.kill("SIGKILL")
    api.close()
  }

  private startProgram(): void {
    const [command, ...args] = this.options.launch.command
    // the program's stdout and stderr go to the pipes the server keeps (the launch's output), not
    // to the proxy's own, which carry the proxy's log
    const output = this.options.launch.output
    const child = ChildProcess.spawn(command!, args, {
      env: envRecord(this.options.launch.env),
      cwd: this.options.launch.workingDir,
      stdio: ["ignore", output?.stdout ?? "inherit", output?.stderr ?? "inherit"],
      // the image's User: the deployer mapped it in the container's user namespace
      ...(this.options.launch.user !== undefined ? { uid: this.options.launch.user.uid, gid: this.options.launch.user.gid } : {})
    })
    this.program = child
    // the program has its copies: the proxy keeps none open (the server sees the stream end with the program)
    if (output !== undefined) for (const fd of [output.stdout, output.stderr]) closeQuietly(fd)
    child.once("error", (e) => this.programEnded(`the program ${command} could not be started: ${startProblem(e, this.options.launch.workingDir)}`))
    child.once("exit", (code, signal) => {
      if (code === 0) return this.programEnded(undefined)
      if (signal === null) return this.programEnded(`the program ended with exit status ${code}`)
      const oom = (this.options.oomKills?.() ?? 0) > 0 ? ", out of memory: it passed the container's memory limit" : ""
      this.programEnded(`the program was killed by ${signal}${oom}`)
    })
  }

  private programEnded(error: string | undefined): void {
    if (this.ended !== undefined) return
    this.ended = { error }
    this.log(error ?? "the program ended")
    this.endBegin()
  }

  /** the program's end ends the begin scope: its error first, when it failed */
  private endBegin(): void {
    const begin = this.begin
    if (begin === undefined || this.ended === undefined || begin.isEnded) return
    if (this.ended.error !== undefined) begin.respond(tagged(Answer.error, this.ended.error))
    begin.finish()
  }

  private onBegin(scope: Scope, body: Buffer): void {
    if (this.begin !== undefined) return refuseScope(scope, "the begin scope is open already")
    this.begin = scope
    scope.respond(tagged(Answer.begun, `{"secrets":${this.options.launch.secrets}}`))
    scope.peerOpened.listen((channel) => this.onBeginChannel(channel), () => {})
    if (!this.takesSecrets()) settle(this.secrets, Buffer.from("{}"))
    settle(this.begun, body)
    this.endBegin()
  }

  private takesSecrets(): boolean {
    return Object.keys(JSON.parse(this.options.launch.secrets) as object).length > 0
  }

  private onBeginChannel(channel: PeerChannel): void {
    if (channel.request[0] !== ProxyChannel.secrets) return channel.finish()
    const values = Buffer.from(channel.request.subarray(1))
    if (!isJsonObject(values)) return answerChannel(channel, [tagged(Answer.error, "the secrets are not a JSON object")])
    settle(this.secrets, values)
    answerChannel(channel, [tagged(Answer.ok)])
  }

  private async onMount(scope: Scope, request: MountRequest): Promise<void> {
    const result = await this.options.mountFuse({
      id: request.id,
      target: request.path,
      kind: request.kind,
      ask: (payload) => {
        const channel = scope.openChannel(payload)
        return {
          [Symbol.asyncIterator]: () => ({
            next: async () => {
              const value = await channel.responses.take()
              return value === undefined ? { done: true as const, value: undefined } : { done: false as const, value }
            }
          })
        }
      }
    })
    if (!result.mounted) return refuseScope(scope, result.message)
    this.unmounts.push(result.unmount)
    scope.respond(tagged(Answer.ok))
  }

  private async serveProgram(request: Http.IncomingMessage, response: Http.ServerResponse): Promise<void> {
    const fail = (status: number, message: string) => {
      response.writeHead(status, { "content-type": "text/plain; charset=utf-8" })
      response.end(message + "\n")
    }
    const path = (request.url ?? "").split("?")[0]!
    const method = request.method ?? ""
    try {
      if (method === "GET" && path === "/begin") {
        const body = await valueOf(this.begun)
        response.writeHead(200, { "content-type": "application/json" })
        return void response.end(body)
      }
      if (method === "GET" && path === "/secrets") {
        const body = await valueOf(this.secrets)
        response.writeHead(200, { "content-type": "application/json" })
        return void response.end(body)
      }
      if ((method === "PUT" || method === "POST") && path === "/rotating") {
        const body = await readBody(request)
        if (!isJsonObject(body)) return fail(400, "the rotating secrets are a JSON object")
        this.rotating = body
        response.writeHead(204)
        return void response.end()
      }
      const ask = /^\/ask\/(\d+)$/.exec(path)
      if (method === "POST" && ask !== null) {
        const tag = Number(ask[1])
        if (tag < 16 || tag > 255) return fail(400, "an ask's tag is 16 to 255")
        const body = await readBody(request)
        await valueOf(this.begun)
        const begin = this.begin!
        if (begin.isEnded) return fail(409, "the run has ended")
        return await this.relayAsk(begin, tagged(tag, body), response)
      }
      fail(404, "GET /begin, GET /secrets, PUT /rotating, POST /ask/TAG")
    } catch (e) {
      fail(500, (e as Error).message)
    }
  }

  /** one exchange: Active where none was in flight, Inactive with the rotating secrets once none is */
  private async relayAsk(begin: Scope, payload: Buffer, response: Http.ServerResponse): Promise<void> {
    if (this.inFlight++ === 0) begin.respond(tagged(Answer.active))
    const channel = begin.openChannel(payload)
    response.writeHead(200, { "content-type": "application/octet-stream" })
    for (;;) {
      const answer = await channel.responses.take()
      if (answer === undefined) break
      const length = Buffer.allocUnsafe(4)
      length.writeUInt32BE(answer.length)
      response.write(length)
      response.write(answer)
    }
    response.end()
    if (--this.inFlight === 0) begin.respond(tagged(Answer.inactive, this.rotating))
  }
}
