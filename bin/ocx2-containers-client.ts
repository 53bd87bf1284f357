// `ocx2 containers ...` as a bundle of its own (src/adapters/cli/containersCommand.ts): the CLI's own
// bundle then holds no WebSocket client.
export { runContainersCli } from "../src/containers/ContainersCli.js"
