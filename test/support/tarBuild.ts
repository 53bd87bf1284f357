/**
 * Builds tar archives for the image tests, entry by entry, with whatever names and links a test
 * wants (the escaping ones too): ustar headers, a pax header for a name or link too long for them.
 */
export type TarSpec =
  | { readonly path: string; readonly type: "file"; readonly content: Uint8Array | string; readonly mode?: number }
  | { readonly path: string; readonly type: "directory"; readonly mode?: number }
  | { readonly path: string; readonly type: "symlink" | "link"; readonly target: string }

const header = (name: string, flag: string, size: number, mode: number, linkname: string): Buffer => {
  const block = Buffer.alloc(512)
  block.write(name, 0, 100, "utf8")
  block.write(mode.toString(8).padStart(7, "0") + "\0", 100, "ascii")
  block.write("0000000\0", 108, "ascii")
  block.write("0000000\0", 116, "ascii")
  block.write(size.toString(8).padStart(11, "0") + "\0", 124, "ascii")
  block.write((1_700_000_000).toString(8).padStart(11, "0") + "\0", 136, "ascii")
  block.write("        ", 148, "ascii")
  block.write(flag, 156, "ascii")
  block.write(linkname, 157, 100, "utf8")
  block.write("ustar\0" + "00", 257, "latin1")
  let sum = 0
  for (const b of block) sum += b
  block.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "ascii")
  return block
}

const padded = (bytes: Uint8Array): Buffer => Buffer.concat([bytes, Buffer.alloc((512 - (bytes.length % 512)) % 512)])

const paxRecord = (key: string, value: string): string => {
  const body = ` ${key}=${value}\n`
  let length = body.length + 1
  while (`${length}${body}`.length !== length) length++
  return `${length}${body}`
}

export const tar = (entries: ReadonlyArray<TarSpec>): Buffer => {
  const out: Array<Buffer> = []
  for (const e of entries) {
    const link = e.type === "symlink" || e.type === "link" ? e.target : ""
    if (Buffer.byteLength(e.path) > 99 || Buffer.byteLength(link) > 99) {
      const pax = Buffer.from(paxRecord("path", e.path) + (link !== "" ? paxRecord("linkpath", link) : ""))
      out.push(header("PaxHeader", "x", pax.length, 0o644, ""), padded(pax))
    }
    const name = e.path.slice(0, 99)
    if (e.type === "file") {
      const content = typeof e.content === "string" ? Buffer.from(e.content) : e.content
      out.push(header(name, "0", content.length, e.mode ?? 0o644, ""), padded(content))
    } else if (e.type === "directory") out.push(header(name, "5", 0, e.mode ?? 0o755, ""))
    else out.push(header(name, e.type === "symlink" ? "2" : "1", 0, 0o777, link.slice(0, 99)))
  }
  out.push(Buffer.alloc(1024))
  return Buffer.concat(out)
}
