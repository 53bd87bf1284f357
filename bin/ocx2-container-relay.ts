// The relay to a container's proxy: run by the deployer in the container's network namespace
// (nsenter --net) but the host's mount namespace, it makes port PORT of the container's loopback
// reachable at the host's Unix socket SOCKET: `ocx2-container-relay SOCKET PORT`.
//
// It listens at once and prints "listening"; a connection it accepts waits, unread, until the
// proxy accepts the connection made for it (tried again every few milliseconds, with no deadline),
// so the server's one dial needs no retry while the container starts; it prints "reached" once it
// relays one. On the line "gone" on its standard input (the container ended) every connection
// waiting and every later one is answered HTTP 503: there is no proxy to wait for. It ends when its
// standard input does: the server that started it is gone.
import * as Net from "node:net"

const [socketPath, portText] = process.argv.slice(2)
const port = Number(portText)
if (socketPath === undefined || !Number.isInteger(port)) {
  process.stderr.write("usage: ocx2-container-relay SOCKET PORT\n")
  process.exit(2)
}

let gone = false
process.stdin.on("data", (d: Buffer) => {
  if (d.toString().includes("gone")) gone = true
})
process.stdin.on("end", () => process.exit(0))
process.stdin.on("close", () => process.exit(0))

const upstream = (): Promise<Net.Socket | undefined> =>
  new Promise((resolve) => {
    const s = Net.connect({ host: "127.0.0.1", port })
    s.once("connect", () => {
      s.removeAllListeners("error")
      resolve(s)
    })
    s.once("error", () => resolve(undefined))
  })

/** a connection to the proxy once it listens (refused until then, so made again); undefined once the container is gone */
const proxy = async (): Promise<Net.Socket | undefined> => {
  for (;;) {
    if (gone) return undefined
    const s = await upstream()
    if (s !== undefined) return s
    await new Promise((r) => setTimeout(r, 3))
  }
}

const turnAway = (down: Net.Socket) => {
  down.resume()
  down.end("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
}

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

const server = Net.createServer({ pauseOnConnect: true }, async (down) => {
  let closed = false
  down.once("close", () => (closed = true))
  down.on("error", () => (closed = true))
  const up = await proxy()
  if (up === undefined) return turnAway(down)
  if (closed) return up.destroy()
  pair(down, up)
  down.resume()
  process.stdout.write("reached\n")
})
server.listen(socketPath, () => process.stdout.write("listening\n"))
