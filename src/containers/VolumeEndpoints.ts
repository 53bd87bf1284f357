import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Scope } from "./FrameConnection.js"
import { tagged } from "./Frames.js"
import { isVolumeMode, isVolumeName, isVolumePath } from "./ContainerNames.js"
import type { ServerParts } from "./ServerParts.js"
import { VolumeError } from "./VolumeStore.js"
import { Answer, Endpoint, errorAnswer, okAnswer, ServerChannel } from "./Wire.js"

/**
 * volumes::list, create, and the six operations that holds refer to (docs/containers.md
 * sections 3 and 6). Each of the six is refused while a run holds its volume, and marks the
 * volume busy while it is in flight, so that a run naming it is refused with 0x01.
 */
const utf8 = new TextDecoder("utf-8", { fatal: true })

type Body = Record<string, unknown>

const decodeBody = (payload: Buffer, keys: ReadonlyArray<string>, required: ReadonlyArray<string>): Body | undefined => {
  try {
    const v = JSON.parse(utf8.decode(payload.subarray(1))) as unknown
    if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined
    const b = v as Body
    if (Object.keys(b).some((k) => !keys.includes(k))) return undefined
    if (required.some((k) => !(k in b))) return undefined
    for (const k of Object.keys(b)) if (typeof b[k] !== "string") return undefined
    return b
  } catch {
    return undefined
  }
}

const chunk = 64 * 1024

export const serveVolumeEndpoint = async (parts: ServerParts, identity: string, scope: Scope): Promise<void> => {
  const tag = scope.request[0]
  const fail = (message: string) => {
    scope.respond(errorAnswer(message))
    scope.finish()
  }
  switch (tag) {
    case Endpoint.volumesList: {
      if (decodeBody(scope.request, [], []) === undefined) return scope.finish()
      scope.respond(okAnswer(JSON.stringify(parts.volumes.list(identity))))
      return scope.finish()
    }
    case Endpoint.volumesCreate: {
      const b = decodeBody(scope.request, ["name", "mode"], ["name", "mode"])
      if (b === undefined || !isVolumeName(b.name as string) || !isVolumeMode(b.mode)) return scope.finish()
      try {
        parts.volumes.create(identity, b.name as string, b.mode)
      } catch (e) {
        return fail(e instanceof Error ? e.message : String(e))
      }
      scope.respond(okAnswer())
      return scope.finish()
    }
    case Endpoint.volumesStat:
    case Endpoint.volumesRead:
    case Endpoint.volumesWrite:
    case Endpoint.volumesFiletree:
    case Endpoint.volumesEdit:
    case Endpoint.volumesDelete:
      return operation(parts, identity, scope, tag)
    default:
      return scope.finish()
  }
}

const shapes: Record<number, { keys: ReadonlyArray<string>; required: ReadonlyArray<string> }> = {
  [Endpoint.volumesStat]: { keys: ["volume", "path"], required: ["volume", "path"] },
  [Endpoint.volumesRead]: { keys: ["volume", "path"], required: ["volume", "path"] },
  [Endpoint.volumesWrite]: { keys: ["volume", "path"], required: ["volume", "path"] },
  [Endpoint.volumesFiletree]: { keys: ["volume", "path"], required: ["volume"] },
  [Endpoint.volumesEdit]: { keys: ["volume", "path", "old", "new"], required: ["volume", "path", "old", "new"] },
  [Endpoint.volumesDelete]: { keys: ["volume", "path"], required: ["volume"] }
}

const operation = async (parts: ServerParts, identity: string, scope: Scope, tag: number): Promise<void> => {
  const shape = shapes[tag]!
  const b = decodeBody(scope.request, shape.keys, shape.required)
  const volume = b?.volume as string | undefined
  const path = (b?.path as string | undefined) ?? ""
  if (b === undefined || !isVolumeName(volume!) || !isVolumePath(path)) return scope.finish()
  const fail = (message: string) => {
    scope.respond(errorAnswer(message))
    scope.finish()
  }
  if (parts.volumes.modeOf(identity, volume!) === undefined) return fail(`there is no volume ${JSON.stringify(volume)}`)
  const done = parts.holds.beginOperation(identity, volume!)
  if (done === undefined) return fail(`the volume ${JSON.stringify(volume)} is held by a running container`)
  try {
    await perform(parts, identity, scope, tag, volume!, path, b)
  } catch (e) {
    if (!(e instanceof VolumeError) && !(e instanceof Error && "code" in e)) throw e
    if (!scope.isEnded) scope.respond(errorAnswer(e.message))
  } finally {
    done()
    scope.finish()
  }
}

const perform = async (parts: ServerParts, identity: string, scope: Scope, tag: number, volume: string, path: string, b: Body) => {
  const volumes = parts.volumes
  switch (tag) {
    case Endpoint.volumesStat: {
      const s = Fs.lstatSync(volumes.resolve(identity, volume, path))
      const kind = s.isDirectory() ? "directory" : s.isSymbolicLink() ? "symlink" : "file"
      return scope.respond(okAnswer(JSON.stringify({ kind, size: s.size, mtime_ms: Math.floor(s.mtimeMs) })))
    }
    case Endpoint.volumesRead: {
      const file = volumes.resolve(identity, volume, path)
      const handle = await Fs.promises.open(file, "r")
      try {
        const buffer = Buffer.allocUnsafe(chunk)
        let sent = false
        for (;;) {
          const { bytesRead } = await handle.read(buffer, 0, chunk, null)
          if (bytesRead === 0) break
          scope.respond(tagged(Answer.ok, buffer.subarray(0, bytesRead)))
          sent = true
          // a client that reads slower than the disk: read on only as it takes what was sent
          await scope.connection.whenDrained()
        }
        if (!sent) scope.respond(okAnswer())
      } finally {
        await handle.close()
      }
      return
    }
    case Endpoint.volumesWrite: {
      const file = volumes.resolve(identity, volume, path, false)
      // the bytes come on a write-data channel the client answers; the op is in flight until it finishes
      const data = scope.openChannel(tagged(ServerChannel.writeData, JSON.stringify({ volume, path })))
      const temporary = `${file}.ocx2-write-${process.pid}-${Math.random().toString(36).slice(2)}`
      const handle = await Fs.promises.open(temporary, "wx", 0o600)
      let complete = false
      try {
        for (;;) {
          const payload = await data.responses.take()
          if (payload === undefined) break
          if (payload[0] !== Answer.ok) throw new VolumeError("the client's write-data answer is not 0x00 + bytes")
          await handle.write(payload.subarray(1))
        }
        complete = data.finished
      } finally {
        await handle.close()
        if (!complete) await Fs.promises.rm(temporary, { force: true })
      }
      if (!complete) return
      await Fs.promises.rename(temporary, file)
      return scope.respond(okAnswer())
    }
    case Endpoint.volumesFiletree: {
      const top = volumes.resolve(identity, volume, path)
      const entries: Array<{ path: string; kind: string; size: number }> = []
      const walk = (dir: string, prefix: string) => {
        for (const name of Fs.readdirSync(dir).sort()) {
          const full = Path.join(dir, name)
          const s = Fs.lstatSync(full)
          const rel = prefix === "" ? name : `${prefix}/${name}`
          const kind = s.isDirectory() ? "directory" : s.isSymbolicLink() ? "symlink" : "file"
          entries.push({ path: rel, kind, size: s.size })
          if (s.isDirectory()) walk(full, rel)
        }
      }
      if (Fs.lstatSync(top).isDirectory()) walk(top, "")
      return scope.respond(okAnswer(JSON.stringify(entries)))
    }
    case Endpoint.volumesEdit: {
      const file = volumes.resolve(identity, volume, path)
      const text = Fs.readFileSync(file, "utf8")
      const old = b.old as string
      const first = old === "" ? -1 : text.indexOf(old)
      if (first < 0) throw new VolumeError(`${JSON.stringify(path)} does not contain the text to replace`)
      if (text.indexOf(old, first + 1) >= 0) throw new VolumeError(`${JSON.stringify(path)} contains the text to replace more than once`)
      const temporary = `${file}.ocx2-edit-${process.pid}`
      Fs.writeFileSync(temporary, text.slice(0, first) + (b.new as string) + text.slice(first + old.length))
      Fs.renameSync(temporary, file)
      return scope.respond(okAnswer())
    }
    case Endpoint.volumesDelete: {
      if (path === "") volumes.deleteVolume(identity, volume)
      else Fs.rmSync(volumes.resolve(identity, volume, path), { recursive: true })
      return scope.respond(okAnswer())
    }
  }
}
