/**
 * Composing and parsing Fossil control artifacts (manifest.c): one card per line,
 * cards in byte order, values fossilized, a W card's text counted in bytes, and a Z
 * card holding the MD5 of everything before it. An artifact is named by the SHA3-256
 * of its bytes, so composing the same input twice gives the same artifact: a retried
 * write of a composed artifact can be recognised by its hash.
 */
import { fossilize, defossilize } from "./Fossilize.js"
import type { Artifact } from "../../services/Repository.js"
import { md5, sha3 } from "./Hash.js"

// what a composed artifact is, the Repository service's writes take
export type { Artifact }

/** Fossil's D card form: UTC `YYYY-MM-DDTHH:MM:SS.SSS`. */
export const dateCard = (date: Date): string => date.toISOString().replace(/Z$/, "")

const finish = (body: string): Artifact => {
  const text = `${body}Z ${md5(Buffer.from(body, "utf8"))}\n`
  const bytes = Buffer.from(text, "utf8")
  return { bytes, hash: sha3(bytes) }
}

/** A login becomes a U card value; Fossil refuses none, but an empty one is no user. */
const userCard = (user: string) => `U ${fossilize(user)}\n`

export interface ForumPostInput {
  readonly user: string
  readonly date: Date
  readonly text: string
  /** default text/x-markdown, as Fossil's forms; text/x-fossil-wiki has no N card */
  readonly mimetype?: string
  /** a new thread (or an edit of a thread's first post) */
  readonly title?: string
  /** the thread's first post: replies and edits */
  readonly root?: string
  /** the post answered */
  readonly replyTo?: string
  /** the version this post replaces */
  readonly edit?: string
}

/** A forum post: cards D [G] [H] [I] [N] [P] U W Z. */
export const composeForumPost = (p: ForumPostInput): Artifact => {
  const mimetype = p.mimetype ?? "text/x-markdown"
  let x = `D ${dateCard(p.date)}\n`
  if (p.root !== undefined) x += `G ${p.root}\n`
  if (p.title !== undefined) x += `H ${fossilize(p.title)}\n`
  if (p.replyTo !== undefined) x += `I ${p.replyTo}\n`
  if (mimetype !== "text/x-fossil-wiki") x += `N ${fossilize(mimetype)}\n`
  if (p.edit !== undefined) x += `P ${p.edit}\n`
  x += userCard(p.user)
  x += `W ${Buffer.byteLength(p.text, "utf8")}\n${p.text}\n`
  return finish(x)
}

export interface TicketChangeInput {
  readonly user: string
  readonly date: Date
  /** the ticket's id: 40 lower-case hex */
  readonly ticket: string
  /** fields set by this change (`J name value`) */
  readonly fields: Readonly<Record<string, string>>
  /** fields appended to (`J +name value`), e.g. icomment */
  readonly append?: Readonly<Record<string, string>>
}

/** A ticket change: cards D J... K U Z, J cards sorted by field name. */
export const composeTicketChange = (t: TicketChangeInput): Artifact => {
  const cards: Array<[string, string]> = []
  for (const [name, value] of Object.entries(t.fields)) cards.push([name, `J ${name} ${fossilize(value)}\n`])
  for (const [name, value] of Object.entries(t.append ?? {})) cards.push([name, `J +${name} ${fossilize(value)}\n`])
  cards.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  let x = `D ${dateCard(t.date)}\n`
  for (const [, card] of cards) x += card
  x += `K ${t.ticket}\n`
  x += userCard(t.user)
  return finish(x)
}

export interface TagInput {
  readonly user: string
  readonly date: Date
  /** the check-in (or other artifact) tagged, full hash */
  readonly target: string
  /** the tag's name as stored: a raw tag such as ci or audited, or sym-NAME */
  readonly name: string
  /** + adds (one artifact only), * adds and propagates, - cancels */
  readonly op?: "+" | "*" | "-"
  readonly value?: string
}

/** A tag (control) artifact: cards D T U Z. */
export const composeTag = (t: TagInput): Artifact => {
  let x = `D ${dateCard(t.date)}\n`
  x += `T ${t.op ?? "+"}${fossilize(t.name)} ${t.target}`
  if (t.value !== undefined && (t.op ?? "+") !== "-") x += ` ${fossilize(t.value)}`
  x += "\n"
  x += userCard(t.user)
  return finish(x)
}

/** One card of a parsed artifact: its letter and its (still fossilized) arguments. */
export interface Card {
  readonly letter: string
  readonly args: ReadonlyArray<string>
}

export interface ParsedArtifact {
  readonly cards: ReadonlyArray<Card>
  /** the text after a W card, if any */
  readonly wiki: string | undefined
}

/**
 * Parses the cards of a control artifact. Unlike Fossil it does not check the card
 * set: it is used on artifacts Fossil has already accepted.
 */
export const parseArtifact = (bytes: Uint8Array): ParsedArtifact => {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const cards: Array<Card> = []
  let wiki: string | undefined
  let at = 0
  while (at < buf.length) {
    let end = buf.indexOf(0x0a, at)
    if (end < 0) end = buf.length
    const line = buf.toString("utf8", at, end)
    at = end + 1
    if (line.length === 0) continue
    const letter = line[0]!
    const args = line.length > 2 ? line.slice(2).split(" ") : []
    if (letter === "W") {
      const size = Number(args[0])
      wiki = buf.toString("utf8", at, at + size)
      at += size + 1
    }
    cards.push({ letter, args })
  }
  return { cards, wiki }
}

export const cardValue = (parsed: ParsedArtifact, letter: string): string | undefined => {
  const card = parsed.cards.find((c) => c.letter === letter)
  return card === undefined ? undefined : defossilize(card.args.join(" "))
}

/** The T cards of a tag artifact or manifest, decoded. */
export interface TagCard {
  readonly op: "+" | "*" | "-"
  readonly name: string
  /** a full hash, or "*" for a tag on the manifest itself */
  readonly target: string
  readonly value: string | undefined
}

export const tagCards = (parsed: ParsedArtifact): ReadonlyArray<TagCard> =>
  parsed.cards.filter((c) => c.letter === "T" && c.args.length >= 2).map((c) => {
    const raw = c.args[0]!
    const op = raw[0] === "*" || raw[0] === "-" ? raw[0] : "+"
    return {
      op,
      name: defossilize(raw.slice(1)),
      target: c.args[1]!,
      value: c.args.length > 2 ? defossilize(c.args.slice(2).join(" ")) : undefined
    }
  })
