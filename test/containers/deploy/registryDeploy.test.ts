import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it, vi } from "@effect/vitest"
import * as BwrapDeployer from "../../../layers/BwrapDeployer.js"
import { connect } from "../../../src/containers/Client.js"
import { makeServerParts } from "../../../src/containers/Parts.js"
import { mintToken, startContainersServer } from "../../../src/containers/Server.js"
import { ServerChannel } from "../../../src/containers/Wire.js"
import { busyboxImage } from "../../support/ociImages.js"
import { registryHolding, storeUnder } from "../../support/registry.js"
import { until } from "../world.js"
import { containersUnder, dist, leftovers, tempDir } from "./deployWorld.js"

vi.setConfig({ testTimeout: 300_000, hookTimeout: 120_000 })

/**
 * The whole way, for real: an image of two layers (the second with whiteouts) by digest from a
 * registry on loopback (Debian's docker-registry), verified, unpacked into the store and run in a
 * bubblewrap container whose program sees the layers applied; then the same image again from the
 * store (nothing fetched, nothing unpacked), in the spare stood up for it. Nothing left after.
 */
const dir = tempDir("registry-deploy")
const api = "http://127.0.0.1:14978"
const image = busyboxImage({
  run: {
    Entrypoint: ["/bin/sh", "-c"],
    Cmd: [`busybox wget -q -O /dev/null --post-data "motd=$(cat /etc/motd) gone=$(test -e /etc/gone && echo yes || echo no) cache=$(echo $(ls /var/cache))" ${api}/ask/17`],
    Env: ["PATH=/bin"]
  }
})
const registry = registryHolding(dir, image, "tests/busybox")

describe("an image from a registry, run in a real container", () => {
  it.live("is fetched, verified and unpacked with its whiteouts, runs, and runs again from the store in its spare", () => Effect.gen(function*() {
    const root = Path.join(dir, "root")
    Fs.mkdirSync(root)
    const unpacked: Array<string> = []
    const layers = Layer.merge(
      BwrapDeployer.layer({ root, proxyBundle: Path.join(dist, "ocx2-container-proxy.mjs"), relayProgram: Path.join(dist, "ocx2-container-relay") }),
      storeUnder(root, { registries: [{ url: registry().url, repositories: ["tests/busybox"] }] }, (digest) => unpacked.push(digest))
    )
    const parts = yield* makeServerParts(root).pipe(Effect.provide(layers))
    const server = yield* Effect.promise(() => startContainersServer({ root, parts }))
    const client = yield* Effect.promise(() => connect(`ws://127.0.0.1:${server.port}`, mintToken(root, "alice")))
    yield* Effect.gen(function*() {
      const runOnce = async () => {
        const asks: Array<string> = []
        const oci: Array<number> = []
        let ranIn = ""
        const run = client.run(JSON.stringify({ image: image.digest, template: "t", memory: 128 << 20, disk: 16 << 20 }), {
          onServerChannel: (c) => void oci.push(c.request[0]!),
          onAsk: (c) => {
            ranIn = containersUnder(root).filter((x) => !x.spare).map((x) => x.name).join(",")
            asks.push(c.request.subarray(1).toString("utf8"))
            c.finish()
          }
        })
        const first = await run.first
        expect(first.kind, JSON.stringify(first)).toBe("id")
        await run.finished
        return { asks, ranIn, oci: oci.filter((t) => t === ServerChannel.ociHas || t === ServerChannel.ociManifest || t === ServerChannel.ociBlob) }
      }
      const fromRegistry = yield* Effect.promise(() => runOnce())
      expect(fromRegistry.asks).toEqual(["motd=layer 2 gone=no cache=c"])
      expect(unpacked).toEqual([image.digest])
      // the client was asked first (it had nothing), then the registry
      expect(fromRegistry.oci).toEqual([ServerChannel.ociHas])
      yield* Effect.promise(() => until(() => containersUnder(root).some((c) => c.spare && c.relayPid !== undefined), "the spare to stand up"))
      const spare = containersUnder(root).find((c) => c.spare)!.name
      const fromStore = yield* Effect.promise(() => runOnce())
      expect(fromStore.asks).toEqual(["motd=layer 2 gone=no cache=c"])
      expect(fromStore.oci).toEqual([])
      expect(unpacked).toEqual([image.digest])
      expect(fromStore.ranIn).toBe(spare)
    }).pipe(Effect.ensuring(Effect.promise(() => {
      client.close()
      return server.close()
    })))
    expect(leftovers(root)).toEqual([])
    expect(Fs.readdirSync(Path.join(root, "containers"))).toEqual([])
  }))
})
