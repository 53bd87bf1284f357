import type * as Net from "node:net"

/**
 * The messages between the FUSE tests and their serving program, on a Unix socket:
 * `[length: u32][type: u8][number: u32][payload]`. Ask (1, to the test) and answer (2, to the
 * program) by number; command (3, JSON, to the program) and event (4, JSON, to the test).
 */
export const Message = { ask: 1, answer: 2, command: 3, event: 4 } as const

export const sendMessage = (socket: Net.Socket | undefined, type: number, number: number, payload: Buffer): void => {
  const head = Buffer.alloc(9)
  head.writeUInt32BE(5 + payload.length, 0)
  head[4] = type
  head.writeUInt32BE(number, 5)
  socket?.write(Buffer.concat([head, payload]))
}

/** calls ON for each whole message that arrives on SOCKET */
export const onMessages = (socket: Net.Socket, on: (type: number, number: number, payload: Buffer) => void): void => {
  let pending = Buffer.alloc(0)
  socket.on("data", (data: Buffer) => {
    pending = Buffer.concat([pending, data])
    while (pending.length >= 4 && pending.length >= 4 + pending.readUInt32BE(0)) {
      const length = pending.readUInt32BE(0)
      const message = Buffer.from(pending.subarray(9, 4 + length))
      const [type, number] = [pending[4]!, pending.readUInt32BE(5)]
      pending = pending.subarray(4 + length)
      on(type, number, message)
    }
  })
}
