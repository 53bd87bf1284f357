import { describe, expect, it } from "vitest"
import { holdsMessage, readMessage, writeMessage } from "../../src/protocol/Envelope.js"

const RE = "ab".repeat(20)
const block = (json: string, info = "json", fence = "```") => `${fence}${info}\n${json}\n${fence}`

describe("readMessage: fences (2.0)", () => {
  it("reads a run out of prose", () => {
    const text = `Any text around it is for people.\n\n${block(`{"ocx": 2, "to": "lab-2", "run": {"x": 1}}`)}\n\nbye`
    const m = readMessage(text)
    expect(m).toMatchObject({ _tag: "Message", kind: "run", to: "lab-2", content: { x: 1 }, version: 2 })
  })

  it("takes the info string json in any case", () => {
    expect(readMessage(block(`{"ocx":2,"re":"${RE}","stop":{}}`, "JSON"))._tag).toBe("Message")
    expect(readMessage(block(`{"ocx":2,"re":"${RE}","stop":{}}`, " Json "))._tag).toBe("Message")
  })

  it.each(["js", "json5", "json title", ""])("a block with info string %j is not a message", (info) => {
    expect(readMessage(block(`{"ocx":2,"re":"${RE}","stop":{}}`, info))._tag).toBe("NoMessage")
  })

  it("a fence may be indented up to three spaces; four is indented code", () => {
    expect(readMessage(`   \`\`\`json\n{"ocx":2,"re":"${RE}","stop":{}}\n   \`\`\``)._tag).toBe("Message")
    expect(readMessage(`    \`\`\`json\n{"ocx":2,"re":"${RE}","stop":{}}\n    \`\`\``)._tag).toBe("NoMessage")
  })

  it("a block ends at a line of at least as many backticks and nothing else", () => {
    const valid = `{"ocx":2,"re":"${RE}","stop":{}}`
    expect(readMessage("```json\n" + valid + "\n````\n")._tag).toBe("Message") // a longer line closes
    expect(readMessage("````json\n" + valid + "\n```\n````")._tag).toBe("NoMessage") // a shorter one is content
    expect(readMessage("```json\n" + valid + "\n``` x\n")._tag).toBe("NoMessage") // not a closing line: the block holds it
  })

  it("an unclosed fence runs to the end of the text", () => {
    expect(readMessage(`\`\`\`json\n{"ocx":2,"re":"${RE}","stop":{}}`)._tag).toBe("Message")
  })

  it("reads CRLF texts", () => {
    expect(readMessage(`\`\`\`json\r\n{"ocx":2,"re":"${RE}","stop":{}}\r\n\`\`\`\r\n`)._tag).toBe("Message")
  })

  it("a json fence inside another code block is code, not a message", () => {
    const inner = block(`{"ocx":2,"re":"${RE}","stop":{}}`)
    expect(readMessage(`~~~\n${inner}\n~~~`)._tag).toBe("NoMessage")
    expect(readMessage(`\`\`\`\`md\n${inner}\n\`\`\`\``)._tag).toBe("NoMessage")
  })
})

describe("readMessage: which block, and what it is", () => {
  it("takes the first block whose ocx is 2, passing other versions by", () => {
    const text = [
      block(`{"ocx":1,"node":"x","run":{}}`),
      block(`{"ocx":3,"re":"${RE}","stop":{}}`),
      block(`{"ocx":2,"re":"${RE}","publish":{}}`),
      block(`{"ocx":2,"re":"${RE}","stop":{}}`)
    ].join("\n")
    expect(readMessage(text)).toMatchObject({ _tag: "Message", kind: "publish" })
  })

  it.each([
    ["not JSON", `{"ocx":2,`],
    ["an array", `[{"ocx":2}]`],
    ["ocx as text", `{"ocx":"2","re":"${RE}","stop":{}}`],
    ["ocx a fraction", `{"ocx":2.5,"re":"${RE}","stop":{}}`],
    ["no ocx", `{"re":"${RE}","stop":{}}`],
    ["another version", `{"ocx":1,"re":"${RE}","stop":{}}`]
  ])("a block that is %s is no message", (_, json) => {
    expect(readMessage(block(json))).toEqual({ _tag: "NoMessage" })
  })

  it("a text without blocks holds no message", () => {
    expect(readMessage("just words {\"ocx\": 2}")).toEqual({ _tag: "NoMessage" })
  })

  it.each([
    [`{"ocx":2,"re":"${RE}"}`, "no kind key beside ocx, to and re"],
    [`{"ocx":2,"re":"${RE}","stop":{},"publish":{}}`, "more than one kind key: stop, publish"],
    [`{"ocx":2,"re":"ABC","stop":{}}`, `"re" is not a full artifact hash: "ABC"`],
    [`{"ocx":2,"to":"a b","review":{}}`, `"to" is not a login: "a b"`]
  ])("%s is malformed: %s", (json, reason) => {
    expect(readMessage(block(json))).toEqual({ _tag: "Malformed", reason })
  })

  it("a block with run is always a run, its extra keys kept for refusal 2", () => {
    const m = readMessage(block(`{"ocx":2,"to":"lab-2","node":"n1","run":{}}`))
    expect(m).toMatchObject({ _tag: "Message", kind: "run", block: { node: "n1" } })
  })

  it("passes a kind it does not read, with its name", () => {
    const m = readMessage(block(`{"ocx":2,"to":"reviewer","review":{"checkin":"x"}}`))
    expect(m).toMatchObject({ _tag: "Message", kind: "review", to: "reviewer", content: { checkin: "x" } })
  })

  it("a 64-digit re is a full hash", () => {
    expect(readMessage(block(`{"ocx":2,"re":"${"c".repeat(64)}","ended":{"outcome":"stopped"}}`))).toMatchObject({
      re: "c".repeat(64),
      kind: "ended"
    })
  })
})

describe("holdsMessage: the wide test", () => {
  it.each([
    [block(`{"ocx":2,"re":"${RE}","stop":{}}`), true],
    [block(`{"ocx":1,"node":"x"}`), true],
    [block(`{"ocx":"anything"}`), true],
    [block(`{"ocx": 2, "half`), true],
    [block(`{"x": 1}`), false],
    [block(`[{"ocx": 2}]`), false],
    [block(`{"ocx":2}`, "js"), false],
    [block(`not json`), false],
    ["plain words mentioning \"ocx\"", false]
  ])("%j -> %s", (text, holds) => {
    expect(holdsMessage(text)).toBe(holds)
  })
})

describe("writeMessage", () => {
  it("writes one fenced json block that reads back as written", () => {
    const message = { ocx: 2, re: RE, ended: { outcome: "refused", note: "line1\n```\nline3" } }
    const text = writeMessage(message, "For people.")
    expect(text.startsWith("For people.\n\n```json\n")).toBe(true)
    expect(readMessage(text)).toMatchObject({ _tag: "Message", kind: "ended", re: RE, content: message.ended })
    expect(holdsMessage(text)).toBe(true)
  })
})
