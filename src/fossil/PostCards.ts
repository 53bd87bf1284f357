/**
 * The cards of a forum post a reader needs (D G H I N P U W Z, in that order, one per
 * line, fossil-mechanics 1.2), read from the artifact's bytes without splitting the
 * whole text: only the lines before W are looked at, and the W text is decoded once.
 *
 * G, I and P are what Fossil's crosslink turns into forumpost.froot, firt and fprev
 * (manifest.c: froot = G or the post itself, firt = I, fprev = the first P), so they
 * stand for those columns without three more lookups per post.
 */
import { defossilize } from "./Fossilize.js"

export interface PostCards {
  /** G: the thread's first post; undefined for a first post */
  readonly root: string | undefined
  /** H, defossilized */
  readonly title: string | undefined
  /** I: the post answered */
  readonly inReplyTo: string | undefined
  /** N, defossilized; undefined when absent (text/x-fossil-wiki) */
  readonly mimetype: string | undefined
  /** P: the first token, the version replaced */
  readonly editOf: string | undefined
  /** U, defossilized */
  readonly user: string | undefined
  /** the W text; undefined when there is no W card */
  readonly text: string | undefined
}

const NL = 0x0a
const BACKSLASH = 0x5c

/** a card's value, from after "X " to the end of its line; defossilized only when escaped */
const value = (buf: Buffer, from: number, end: number): string => {
  if (from >= end) return ""
  const s = buf.toString("utf8", from, end)
  const escape = buf.indexOf(BACKSLASH, from)
  return escape >= 0 && escape < end ? defossilize(s) : s
}

/** the first space-separated token of a line's value (a hash) */
const token = (buf: Buffer, from: number, end: number): string => {
  const space = buf.indexOf(0x20, from)
  return buf.toString("latin1", from, space >= 0 && space < end ? space : end)
}

export const parsePostCards = (bytes: Uint8Array): PostCards => {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let root: string | undefined
  let title: string | undefined
  let inReplyTo: string | undefined
  let mimetype: string | undefined
  let editOf: string | undefined
  let user: string | undefined
  let text: string | undefined
  const n = buf.length
  let at = 0
  while (at < n) {
    let end = buf.indexOf(NL, at)
    if (end < 0) end = n
    const letter = buf[at]!
    // "X value": the value starts after the letter and one space
    const from = Math.min(at + 2, end)
    switch (letter) {
      case 0x47: // G
        if (root === undefined) root = token(buf, from, end)
        break
      case 0x48: // H
        if (title === undefined) title = value(buf, from, end)
        break
      case 0x49: // I
        if (inReplyTo === undefined) inReplyTo = token(buf, from, end)
        break
      case 0x4e: // N
        if (mimetype === undefined) mimetype = value(buf, from, end)
        break
      case 0x50: // P
        if (editOf === undefined) editOf = token(buf, from, end)
        break
      case 0x55: // U
        if (user === undefined) user = value(buf, from, end)
        break
      case 0x57: { // W: its text follows, counted in bytes; only Z comes after it
        let size = 0
        for (let i = from; i < end && buf[i]! >= 0x30 && buf[i]! <= 0x39; i++) size = size * 10 + buf[i]! - 0x30
        text = buf.toString("utf8", end + 1, Math.min(end + 1 + size, n))
        return { root, title, inReplyTo, mimetype, editOf, user, text }
      }
    }
    at = end + 1
  }
  return { root, title, inReplyTo, mimetype, editOf, user, text }
}
