// The tool-container server's host, assembled: the deployer and the image source its command line
// chose (src/containers/ServerProgram.ts reads and checks the choice; bin/ocx2-containers gives
// this assembly to it, so the server's code names services only).
import * as Layer from "effect/Layer"
import * as Path from "node:path"
import type { ContainersHostChoice } from "../src/containers/ServerProgram.js"
import * as BwrapDeployer from "./BwrapDeployer.js"
import * as InProcessDeployer from "./InProcessDeployer.js"
import * as MemoryImageSource from "./MemoryImageSource.js"
import * as StoreImageSource from "./StoreImageSource.js"

export const containersHostLayer = (choice: ContainersHostChoice) => {
  const imagePolicy = Path.join(choice.root, "image-policy.json")
  const imageSource = choice.images === "memory"
    ? MemoryImageSource.layer({ refuse: StoreImageSource.refusedImages(imagePolicy) })
    : StoreImageSource.layer({ store: choice.store, registries: choice.registries, credentials: Path.join(choice.root, "registry-credentials"), imagePolicy })
  const deployer = choice.deployer._tag === "bwrap"
    ? BwrapDeployer.layer({ root: choice.root, proxyBundle: choice.deployer.proxyBundle, relayProgram: choice.deployer.relayProgram, ...(choice.deployer.spares !== undefined ? { spares: choice.deployer.spares } : {}) })
    : InProcessDeployer.layer()
  return Layer.merge(deployer, imageSource)
}
