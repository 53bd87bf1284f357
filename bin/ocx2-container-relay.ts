// The relay to a container's proxy: run by the deployer in the container's network namespace
// (nsenter --net) but the host's mount namespace, it makes port PORT of the container's loopback
// reachable at the host's Unix socket SOCKET: `ocx2-container-relay SOCKET PORT`.
//
// It listens only once the proxy accepts a TCP connection (kept for the first connection relayed),
// so until the proxy listens the server's dial finds no socket and is made again. It ends when
// its standard input does: the server that started it is gone.
import * as Net from "node:net"

const [socketPath, portText] = process.argv.slice(2)
const port = Number(portText)
if (socketPath === undefined || !Number.isInteger(port)) {
  process.stderr.write("usage: ocx2-container-relay SOCKET PORT\n")
  process.exit(2)
}
process.stdin.on("end", () => process.exit(0))
process.stdin.on("close", () => process.exit(0))
process.stdin.resume()

const upstream = (): Promise<Net.Socket | undefined> =>
  new Promise((resolve) => {
    const s = Net.connect({ host: "127.0.0.1", port })
    s.once("connect", () => resolve(s))
    s.once("error", () => resolve(undefined))
  })

const pair = (down: Net.Socket, up: Net.Socket) => {
  down.pipe(up)
  up.pipe(down)
  const end = () => {
    down.destroy()
    up.destroy()
  }
  down.once("close", end)
  up.once("close", end)
  down.on("error", end)
  up.on("error", end)
}

const main = async () => {
  let first: Net.Socket | undefined
  for (let wait = 5; first === undefined; wait = Math.min(wait * 2, 200)) {
    first = await upstream()
    if (first === undefined) await new Promise((r) => setTimeout(r, wait))
  }
  let held: Net.Socket | undefined = first
  // the proxy may close it before the server comes: the server's dial then finds a closed stream
  held.once("close", () => (held = undefined))
  const server = Net.createServer({ pauseOnConnect: true }, async (down) => {
    const up = held ?? (await upstream())
    held = undefined
    if (up === undefined) return down.destroy()
    pair(down, up)
    down.resume()
  })
  server.listen(socketPath, () => process.stdout.write("listening\n"))
}
void main()
