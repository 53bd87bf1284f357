// `ocx2 containers ...` as a bundle of its own (src/adapters/cli/ContainersCommand.ts): the CLI's own
// bundle then holds no WebSocket client.
export { runContainersCli } from "../src/containers/ContainersCli.js"
