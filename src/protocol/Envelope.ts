// 2.0: an OCX message is a fenced ```json block in a post's or a ticket change's text.
// Reading never throws: any text gives NoMessage, Malformed or Message.

/** The protocol version ocx2 reads and writes. */
export const VERSION = 2

export const envelopeKeys: ReadonlyArray<string> = ["ocx", "to", "re"]

/** 40 or 64 lower-case hex digits: a full artifact hash */
export const HASH = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/
export const isHash = (value: unknown): value is string => typeof value === "string" && HASH.test(value)

/** A login as ocx2 accepts it: no space, control character, quote, backslash or `*`. */
export const LOGIN = /^[^\s\x00-\x1f\x7f"'\\*]{1,64}$/
export const isLogin = (value: unknown): value is string => typeof value === "string" && LOGIN.test(value)

export interface NoMessage {
  readonly _tag: "NoMessage"
}
export interface Malformed {
  readonly _tag: "Malformed"
  readonly reason: string
}
export interface Message {
  readonly _tag: "Message"
  readonly version: number
  readonly kind: string
  readonly content: unknown
  /** set when the block's `to` is a login */
  readonly to?: string
  /** set when the block's `re` is a full hash */
  readonly re?: string
  /** the whole block, for checks that must see every key (a run's envelope, 2.0) */
  readonly block: Readonly<Record<string, unknown>>
}
export type Reading = NoMessage | Malformed | Message

/** A fenced block as CommonMark finds it: its info string and its lines. */
interface Fenced {
  readonly info: string
  readonly body: string
}

const OPEN = /^ {0,3}(`{3,}|~{3,})(.*)$/

/**
 * Every fenced code block of the text in order. Tilde fences are found too, only so that a
 * ```json line inside one is not taken for a block; an unclosed fence runs to the end of the
 * text, as CommonMark reads it.
 */
const fencedBlocks = (text: string): ReadonlyArray<Fenced> => {
  const lines = text.split("\n").map((line) => (line.endsWith("\r") ? line.slice(0, -1) : line))
  const blocks: Array<Fenced> = []
  let i = 0
  while (i < lines.length) {
    const open = OPEN.exec(lines[i]!)
    i++
    if (open === null) continue
    const fence = open[1]!
    const info = open[2]!
    if (fence[0] === "`" && info.includes("`")) continue // not a fence (CommonMark)
    const close = new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}[ \\t]*$`)
    const body: Array<string> = []
    while (i < lines.length && !close.test(lines[i]!)) body.push(lines[i++]!)
    i++ // past the closing fence (or the end)
    if (fence[0] === "`") blocks.push({ info: info.trim(), body: body.join("\n") })
  }
  return blocks
}

const jsonBlocks = (text: string): ReadonlyArray<string> =>
  fencedBlocks(text)
    .filter((block) => block.info.toLowerCase() === "json")
    .map((block) => block.body)

const parseJson = (body: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false } => {
  try {
    return { ok: true, value: JSON.parse(body) }
  } catch {
    return { ok: false }
  }
}

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const isWholeNumber = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value)

/** The version of a block, when it is an object with a whole-number `ocx`. */
const versionOf = (value: unknown): number | undefined =>
  isObject(value) && isWholeNumber(value["ocx"]) ? value["ocx"] : undefined

/**
 * The wide test of 2.0: some json block parses to an object with an `ocx` member (any
 * version, any value), or fails to parse and contains `"ocx"`.
 */
export const holdsMessage = (text: string): boolean =>
  jsonBlocks(text).some((body) => {
    const parsed = parseJson(body)
    return parsed.ok ? isObject(parsed.value) && Object.hasOwn(parsed.value, "ocx") : body.includes(`"ocx"`)
  })

const noMessage: NoMessage = { _tag: "NoMessage" }
const malformed = (reason: string): Malformed => ({ _tag: "Malformed", reason })

/** Reads the message of a text: the first block whose `ocx` is 2 (2.0, 2.17). */
export const readMessage = (text: string): Reading => {
  for (const body of jsonBlocks(text)) {
    const parsed = parseJson(body)
    if (!parsed.ok || versionOf(parsed.value) !== VERSION) continue
    return readBlock(parsed.value as Readonly<Record<string, unknown>>)
  }
  return noMessage
}

const readBlock = (block: Readonly<Record<string, unknown>>): Malformed | Message => {
  const kindKeys = Object.keys(block).filter((key) => !envelopeKeys.includes(key))
  // A block with `run` is always a run: its extra keys are refused by name (refusal 2).
  const kind = kindKeys.includes("run") ? "run" : kindKeys.length === 1 ? kindKeys[0]! : undefined
  if (kind === undefined) {
    return malformed(
      kindKeys.length === 0 ? "no kind key beside ocx, to and re" : `more than one kind key: ${kindKeys.join(", ")}`
    )
  }
  const to = block["to"]
  const re = block["re"]
  if (kind !== "run") {
    if (to !== undefined && !isLogin(to)) return malformed(`"to" is not a login: ${JSON.stringify(to)}`)
    if (re !== undefined && !isHash(re)) return malformed(`"re" is not a full artifact hash: ${JSON.stringify(re)}`)
  }
  return {
    _tag: "Message",
    version: VERSION,
    kind,
    content: block[kind],
    ...(isLogin(to) ? { to } : {}),
    ...(isHash(re) ? { re } : {}),
    block
  }
}

/**
 * A text holding one fenced json block with the message, after optional prose for people.
 * JSON.stringify escapes every newline, so the block is one line and cannot close early.
 */
export const writeMessage = (message: object, prose?: string): string => {
  const block = "```json\n" + JSON.stringify(message) + "\n```\n"
  return prose === undefined || prose === "" ? block : `${prose.trimEnd()}\n\n${block}`
}
