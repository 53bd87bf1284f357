import { FrameConnection, type Scope } from "./FrameConnection.js"
import { readOutput, type OutputStream } from "./ProgramOutput.js"
import { ContainerRun } from "./ContainerRun.js"
import type { ServerParts } from "./ServerParts.js"
import type { WireSocket } from "./WebSocketWire.js"
import { serveVolumeEndpoint } from "./VolumeEndpoints.js"
import { Endpoint, errorAnswer, okAnswer } from "./Wire.js"

/**
 * One client connection of the tool-container server (docs/containers.md sections 1 to 3): it
 * authorizes with its token (`identityOf` gives the token's identity, or undefined to refuse it),
 * then every scope it opens is served by its endpoint; a run is in `runs` until it ends. The
 * server serves every connection with it, and so does its warm-up (WarmUp.ts), which goes the
 * same way before the server listens.
 */
export const serverVersion = "ocx2-containers 1"

export const serveConnection = (
  socket: WireSocket,
  parts: ServerParts,
  runs: Set<ContainerRun>,
  identityOf: (token: Buffer) => string | undefined,
  onClose: () => void = () => {}
): FrameConnection => {
  let identity: string | undefined
  return new FrameConnection(socket, {
    role: "responder",
    onAuth: (token) => {
      identity = identityOf(token)
      return identity !== undefined
    },
    onScope: (scope) => serveScope(parts, identity!, scope, runs),
    onClose
  })
}

const serveScope = (parts: ServerParts, identity: string, scope: Scope, runs: Set<ContainerRun>): void => {
  const tag = scope.request[0]
  if (tag === Endpoint.toolsRun) {
    const run = new ContainerRun(parts, identity, scope)
    runs.add(run)
    // a run that sent its id goes on after `run` returns: it leaves the set when it ends
    void run.finished.then(() => runs.delete(run))
    void run.run()
    return
  }
  if (tag === Endpoint.containersFuseServe) {
    const id = decodeIdBody(scope.request)
    if (id === undefined) return scope.finish()
    const container = parts.running.find(identity, id)
    if (container === undefined) {
      scope.respond(errorAnswer(`you run no container ${JSON.stringify(id)}`))
      return scope.finish()
    }
    return container.serveTree(scope)
  }
  if (tag === Endpoint.containersOutput) return serveOutput(parts, identity, scope)
  if (tag === Endpoint.version) {
    if (scope.request.length !== 3 || scope.request.toString("utf8", 1) !== "{}") return scope.finish()
    scope.respond(okAnswer(JSON.stringify({ version: serverVersion, capabilities: parts.capabilities })))
    return scope.finish()
  }
  void serveVolumeEndpoint(parts, identity, scope).catch(() => scope.finish())
}

/**
 * containers::output (docs/containers.md section 3): what a container the identity ran wrote on
 * one stream, kept under ROOT/output/IDENTITY/ID; another identity's is not found.
 */
const serveOutput = (parts: ServerParts, identity: string, scope: Scope): void => {
  const asked = decodeOutputBody(scope.request)
  if (asked === undefined) return scope.finish()
  const bytes = parts.root === undefined ? undefined : readOutput(parts.root, identity, asked.id, asked.stream)
  if (bytes === undefined) scope.respond(errorAnswer(`you ran no container ${JSON.stringify(asked.id)} whose output is kept`))
  else for (let at = 0; at < bytes.length || at === 0; at += outputPiece) {
    scope.respond(okAnswer(bytes.subarray(at, at + outputPiece)))
    if (bytes.length === 0) break
  }
  scope.finish()
}

/** the bytes of one response of containers::output */
const outputPiece = 64 * 1024

const decodeOutputBody = (payload: Buffer): { readonly id: string; readonly stream: OutputStream } | undefined => {
  try {
    const v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload.subarray(1))) as Record<string, unknown>
    if (typeof v !== "object" || v === null || Object.keys(v).sort().join() !== "id,stream" || typeof v.id !== "string") return undefined
    return v.stream === "stdout" || v.stream === "stderr" ? { id: v.id, stream: v.stream } : undefined
  } catch {
    return undefined
  }
}

const decodeIdBody = (payload: Buffer): string | undefined => {
  try {
    const v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload.subarray(1))) as Record<string, unknown>
    if (typeof v !== "object" || v === null || Object.keys(v).join() !== "id" || typeof v.id !== "string") return undefined
    return v.id
  } catch {
    return undefined
  }
}
