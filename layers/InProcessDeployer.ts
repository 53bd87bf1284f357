import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "node:stream"
import { DeployError, Deployer, type DeploySpec } from "../services/Deployer.js"
import { InProcessProxy, type ProxyBehaviour } from "../src/containers/InProcessProxy.js"

/**
 * The deployer of part 1 (`ocx2-containers serve --deployer in-process`, and the tests' layer):
 * no container, a proxy in this process (src/containers/InProcessProxy.ts) behaving as the caller
 * says. Tests see every deploy, its proxy and its stop.
 */
export interface InProcessDeployerOptions {
  /** how the proxy of this deploy behaves */
  readonly behaviour?: (spec: DeploySpec) => ProxyBehaviour
  /** a deploy that does not complete, with why */
  readonly fail?: (spec: DeploySpec) => string | undefined
  readonly onDeploy?: (spec: DeploySpec, proxy: InProcessProxy) => void
  /** what this deploy's program writes on stdout and stderr (it has no program: the streams say it, then end) */
  readonly output?: (spec: DeploySpec) => { readonly stdout: string | Uint8Array; readonly stderr: string | Uint8Array } | undefined
}

/** a stream that says BYTES and ends */
const saying = (bytes: string | Uint8Array): Stream.PassThrough => {
  const stream = new Stream.PassThrough()
  stream.end(bytes)
  return stream
}

export interface DeployRecord {
  readonly spec: DeploySpec
  readonly proxy: InProcessProxy
  stops: number
}

export const make = (options: InProcessDeployerOptions = {}, records: Array<DeployRecord> = []) =>
  Deployer.of({
    deploy: (spec) =>
      Effect.gen(function* () {
        const failure = options.fail?.(spec)
        if (failure !== undefined) return yield* Effect.fail(new DeployError({ message: failure }))
        const proxy = new InProcessProxy(options.behaviour?.(spec) ?? {})
        const proxyUrl = yield* Effect.promise(() => proxy.start())
        const record: DeployRecord = { spec, proxy, stops: 0 }
        records.push(record)
        options.onDeploy?.(spec, proxy)
        const output = options.output?.(spec)
        return {
          ...(output !== undefined ? { output: { stdout: saying(output.stdout), stderr: saying(output.stderr) } } : {}),
          proxyUrl,
          stop: Effect.promise(async () => {
            record.stops++
            await proxy.stop()
          })
        }
      })
  })

export const layer = (options: InProcessDeployerOptions = {}, records: Array<DeployRecord> = []) =>
  Layer.sync(Deployer, () => make(options, records))
