import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { ObtainedImage } from "./ImageSource.js"

/**
 * Stands a tool container up (docs/containers.md section 9, step 2): the image started with the
 * limits, every volume mount bound, the container proxy injected and started, and its port 14979
 * reachable to the server. It knows nothing of the protocol: the server dials the proxy itself,
 * exactly once, so the deploy is complete when that dial is accepted. Nothing here times out.
 */
export interface DeploySpec {
  /** the identity the connection was authorized as, which owns the volumes */
  readonly identity: string
  readonly image: ObtainedImage
  /** bytes */
  readonly memory: number
  readonly disk: number
  /** every volume mount resolved on the host, in the request's order */
  readonly mounts: ReadonlyArray<ResolvedMount>
}

export interface ResolvedMount {
  readonly hostPath: string
  readonly containerPath: string
  readonly readOnly: boolean
}

export interface Deployment {
  /** where the proxy's port 14979 is reached: a ws: URL, or ws+unix:SOCKET: */
  readonly proxyUrl: string
  /** stops the container and frees what it used; a second call does nothing */
  readonly stop: Effect.Effect<void>
}

export class DeployError extends Schema.TaggedError<DeployError>()("DeployError", {
  message: Schema.String
}) {}

export interface DeployerService {
  readonly deploy: (spec: DeploySpec) => Effect.Effect<Deployment, DeployError>
  /** frees what the deployer holds ready for deploys to come (the server's close) */
  readonly close?: Effect.Effect<void>
}

export class Deployer extends Context.Tag("ocx2/Deployer")<Deployer, DeployerService>() {}
