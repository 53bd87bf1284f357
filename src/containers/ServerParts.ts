import type { Deployment, DeploySpec } from "../../services/Deployer.js"
import type { ClientImages, ObtainedImage } from "../../services/ImageSource.js"
import type { Capabilities } from "./Capabilities.js"
import type { Running } from "./Running.js"
import type { VolumeHolds } from "./VolumeHolds.js"
import type { VolumeStore } from "./VolumeStore.js"

/** What every scope of the server shares: its volumes, holds, running containers and services. */
export interface ServerParts {
  /** ROOT: where a container program's output is kept (ProgramOutput.ts); none, none kept */
  readonly root?: string
  readonly volumes: VolumeStore
  readonly holds: VolumeHolds
  readonly running: Running
  readonly capabilities: Capabilities
  readonly images: {
    readonly willSupply: (identity: string, digest: string) => Promise<boolean>
    /** the verified image, or the run's error */
    readonly obtain: (identity: string, digest: string, client: ClientImages) => Promise<ObtainedImage | string>
  }
  /** the deployment, or why it did not complete */
  readonly deploy: (spec: DeploySpec) => Promise<Deployment | string>
  readonly stopDeployment: (deployment: Deployment) => Promise<void>
  /** frees what the deployer holds ready for deploys to come (the server's close) */
  readonly closeDeployer?: () => Promise<void>
}
