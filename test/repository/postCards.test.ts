/**
 * Reading a forum post's cards straight from its bytes gives what parsing every card
 * gives (Artifact.parseArtifact), for any post the composer makes: titles, users and
 * mimetypes with escaped characters, any text (newlines, card-like lines, UTF-8).
 */
import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import { cardValue, composeForumPost, parseArtifact } from "../../src/fossil/Artifact.js"
import { parsePostCards } from "../../src/fossil/PostCards.js"

const hash = fc.stringMatching(/^[0-9a-f]{64}$/)
const value = fc.string({ unit: fc.constantFrom("a", "b", " ", "\\", "\n", "\t", "é", "€", "Z", "W 3", "\r") , minLength: 1, maxLength: 20 })
const text = fc.string({ unit: fc.constantFrom("x", " ", "\n", "W 12\n", "H t\n", "Z ", "é", "```json", "{}"), maxLength: 200 })

const post = fc.record({
  user: value,
  text,
  title: fc.option(value, { nil: undefined }),
  root: fc.option(hash, { nil: undefined }),
  replyTo: fc.option(hash, { nil: undefined }),
  edit: fc.option(hash, { nil: undefined }),
  mimetype: fc.option(fc.constantFrom("text/x-markdown", "text/plain", "text/x-fossil-wiki", "text/x markdown"), { nil: undefined })
})

describe("PostCards", () => {
  it("reads G H I N P U W as a full parse does", () => {
    fc.assert(fc.property(post, (p) => {
      const artifact = composeForumPost({
        user: p.user, date: new Date("2026-01-01T00:00:00Z"), text: p.text,
        ...(p.title === undefined ? {} : { title: p.title }),
        ...(p.root === undefined ? {} : { root: p.root }),
        ...(p.replyTo === undefined ? {} : { replyTo: p.replyTo }),
        ...(p.edit === undefined ? {} : { edit: p.edit }),
        ...(p.mimetype === undefined ? {} : { mimetype: p.mimetype })
      })
      const full = parseArtifact(artifact.bytes)
      const cards = parsePostCards(artifact.bytes)
      expect(cards).toEqual({
        root: cardValue(full, "G"), title: cardValue(full, "H"), inReplyTo: cardValue(full, "I"),
        mimetype: cardValue(full, "N"), editOf: cardValue(full, "P"), user: cardValue(full, "U"), text: full.wiki
      })
      expect(cards.text).toBe(p.text)
      expect(cards.title).toBe(p.title)
      expect(cards.user).toBe(p.user)
      expect(cards.root).toBe(p.root)
    }), { numRuns: 300 })
  })

  it("takes the first token of P (the version replaced) and tolerates a card with no value", () => {
    const bytes = Buffer.from(`D 2026-01-01T00:00:00\nH\nP ${"a".repeat(64)} ${"b".repeat(64)}\nU bob\nW 2\nhi\nZ 0\n`)
    expect(parsePostCards(bytes)).toMatchObject({ title: "", editOf: "a".repeat(64), user: "bob", text: "hi" })
    expect(parsePostCards(Buffer.from("D x\nU bob\n"))).toMatchObject({ user: "bob", text: undefined })
  })
})
