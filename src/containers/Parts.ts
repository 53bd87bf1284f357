import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Deployer } from "../../services/Deployer.js"
import { ImageSource } from "../../services/ImageSource.js"
import { narrowCapabilities } from "./Capabilities.js"
import { Running } from "./Running.js"
import type { ServerParts } from "./ServerParts.js"
import { VolumeHolds } from "./VolumeHolds.js"
import { VolumeStore } from "./VolumeStore.js"

/** The server's parts for ROOT, its services taken from the Effect context they are provided in. */
export const makeServerParts = (root: string) =>
  Effect.gen(function* () {
    const deployer = yield* Deployer
    const images = yield* ImageSource
    let given: unknown
    try {
      given = JSON.parse(Fs.readFileSync(Path.join(root, "capabilities.json"), "utf8"))
    } catch {
      given = undefined
    }
    const capabilities = narrowCapabilities(given)
    const volumes = new VolumeStore(root)
    const parts: ServerParts = {
      root,
      volumes,
      holds: new VolumeHolds(capabilities),
      running: new Running(),
      capabilities,
      images: {
        willSupply: (identity, digest) => Effect.runPromise(images.willSupply(identity, digest)),
        obtain: async (identity, digest, client) => {
          const got = await Effect.runPromise(Effect.either(images.obtain(identity, digest, client)))
          return Either.isRight(got) ? got.right : got.left.message
        }
      },
      deploy: async (spec) => {
        const got = await Effect.runPromise(Effect.either(deployer.deploy(spec)))
        return Either.isRight(got) ? got.right : got.left.message
      },
      stopDeployment: (deployment) => Effect.runPromise(deployment.stop),
      closeDeployer: () => (deployer.close === undefined ? Promise.resolve() : Effect.runPromise(deployer.close))
    }
    return parts
  })
