/**
 * An in-memory Repository for unit tests of what uses it: writes append items with
 * growing (rcvid, rid), received from the writing user; reads follow server order.
 * `seed` puts items in as if others had written them (e.g. a run posted by a person).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Crypto from "node:crypto"
import { composeForumPost, composeTag, composeTicketChange, parseArtifact, cardValue, tagCards } from "../src/fossil/Artifact.js"
import { fullcap } from "../src/fossil/Fullcap.js"
import { sha3 } from "../src/fossil/Hash.js"
import {
  InvalidInput, type Item, isAfter, NotFound, type Post, Repository, type RepositoryService, type TagArtifact, type TicketChange,
  type UnversionedFile, type User, WriteRefused, type Written
} from "../services/Repository.js"

export interface TestRepositoryOptions {
  readonly role?: "served" | "clone"
  /** login -> own capabilities */
  readonly users?: Readonly<Record<string, string>>
  /** items already there, in server order */
  readonly seed?: ReadonlyArray<Item>
}

export interface TestRepositoryHandle {
  readonly service: RepositoryService
  /** every item, in server order */
  readonly items: () => ReadonlyArray<Item>
  /** add an item as received from someone else; returns it with its rcvid and rid */
  readonly receive: <I extends Item>(item: Omit<I, "rid" | "rcvid">) => I
}

/** What the test repository holds; made once by `make`, added to by its writes and `receive`. */
interface Store {
  readonly items: Array<Item>
  readonly uv: Map<string, { file: UnversionedFile; content: Buffer }>
  readonly users: Readonly<Record<string, string>>
  readonly role: "served" | "clone"
  /** the last rid and rcvid given */
  readonly last: { rid: number; rcvid: number }
}

const projectCode = "0".repeat(40)

const receive = <I extends Item>(st: Store, item: Omit<I, "rid" | "rcvid">): I => {
  const full = { ...item, rid: ++st.last.rid, rcvid: ++st.last.rcvid } as unknown as I
  st.items.push(full)
  return full
}

const userOf = (st: Store, login: string): User | undefined => {
  const users = st.users
  return users[login] === undefined ? undefined : {
    login, capabilities: users[login]!,
    fullcap: fullcap(users[login]!, { nobody: users["nobody"] ?? "", anonymous: users["anonymous"] ?? "", reader: users["reader"] ?? "", developer: users["developer"] ?? "" })
  }
}

const checkUser = (st: Store, user: string) =>
  st.users[user] === undefined ? Effect.fail(new WriteRefused({ user, reason: "no such user" })) : Effect.void

const written = (st: Store, item: Item): Written => ({
  hash: item.hash, sent: true,
  receipt: st.role === "served" ? { hash: item.hash, rid: item.rid, rcvid: item.rcvid, sender: item.sender! } : undefined
})

const find = (st: Store, name: string) => {
  const found = st.items.filter((i) => i.hash.startsWith(name))
  return found.length === 1 ? Effect.succeed(found[0]!) : Effect.fail(new NotFound({ what: "artifact", name }))
}

const sender = (st: Store, user: string) => (st.role === "served" ? user : undefined)

/** The reads: what is held, in server order. */
const reads = (st: Store) => ({
  readAfter: (cursor, limit = 1000) => {
    const after = st.items.filter((i) => isAfter(i, cursor))
    const taken = after.slice(0, limit)
    const last = taken[taken.length - 1]
    return Effect.succeed({
      items: taken, more: after.length > limit,
      cursor: last === undefined ? cursor : { rcvid: last.rcvid, rid: last.rid }
    })
  },
  thread: (name) =>
    Effect.flatMap(find(st, name), (p) =>
      p._tag !== "Post"
        ? Effect.fail(new NotFound({ what: "forum post", name }))
        : Effect.succeed(st.items.filter((i): i is Post => i._tag === "Post" && i.root === p.root))),
  ticket: (id) => {
    const changes = st.items.filter((i): i is TicketChange => i._tag === "TicketChange" && i.ticket.startsWith(id))
    return changes.length === 0 ? Effect.fail(new NotFound({ what: "ticket", name: id })) : Effect.succeed(changes)
  },
  tags: (checkin) =>
    Effect.flatMap(find(st, checkin), (c) => {
      const history = st.items.filter((i): i is TagArtifact => i._tag === "TagArtifact" && i.tags.some((t) => t.target === c.hash))
      const current = new Map<string, { name: string; value: string | undefined; source: string | undefined }>()
      for (const h of [...history].sort((a, b) => a.date.localeCompare(b.date)))
        for (const t of h.tags) current.set(t.name, { name: t.name, value: t.value, source: h.hash })
      return Effect.succeed({ checkin: c.hash, current: [...current.values()], history })
    }),
  user: (login) => Effect.succeed(userOf(st, login)),
  codes: () => Effect.succeed({ projectCode, serverCode: "1".repeat(40) }),
  artifact: (hash) => Effect.fail(new NotFound({ what: "artifact", name: hash })),
  unversioned: () => Effect.succeed([...st.uv.values()].map((f) => f.file)),
  readUnversioned: (name) => {
    const f = st.uv.get(name)
    return f === undefined ? Effect.fail(new NotFound({ what: "unversioned file", name })) : Effect.succeed(f)
  }
}) satisfies Partial<RepositoryService>

/** The writes of people's items: posts, replies, ticket changes, tags. */
const peoplesWrites = (st: Store) => ({
  post: (input) =>
    Effect.gen(function*() {
      yield* checkUser(st, input.user)
      const a = composeForumPost({ user: input.user, date: new Date(), title: input.title, text: input.text })
      return written(st, receive<Post>(st, {
        _tag: "Post", hash: a.hash, sender: sender(st, input.user), root: a.hash, inReplyTo: undefined, editOf: undefined,
        title: input.title, text: input.text, mimetype: input.mimetype ?? "text/x-markdown", user: input.user
      }))
    }),
  reply: (input) =>
    Effect.gen(function*() {
      yield* checkUser(st, input.user)
      const to = yield* find(st, input.to)
      if (to._tag !== "Post") return yield* new NotFound({ what: "forum post", name: input.to })
      const a = composeForumPost({ user: input.user, date: new Date(), root: to.root, replyTo: to.hash, text: input.text })
      const item = receive<Post>(st, {
        _tag: "Post", hash: a.hash, sender: sender(st, input.user), root: to.root, inReplyTo: to.hash, editOf: undefined,
        title: undefined, text: input.text, mimetype: input.mimetype ?? "text/x-markdown", user: input.user
      })
      return { ...written(st, item), root: to.root }
    }),
  ticketChange: (input) =>
    Effect.gen(function*() {
      yield* checkUser(st, input.user)
      const ticket = input.ticket ?? Crypto.randomBytes(20).toString("hex")
      const a = composeTicketChange({ user: input.user, date: new Date(), ticket, fields: input.fields, ...(input.append === undefined ? {} : { append: input.append }) })
      const item = receive<TicketChange>(st, {
        _tag: "TicketChange", hash: a.hash, sender: sender(st, input.user), ticket,
        text: input.fields["icomment"] ?? input.append?.["icomment"] ?? "", mimetype: input.fields["mimetype"], user: input.user
      })
      return { ...written(st, item), ticket }
    }),
  tag: (input) =>
    Effect.gen(function*() {
      yield* checkUser(st, input.user)
      const target = yield* find(st, input.checkin)
      const a = composeTag({ user: input.user, date: new Date(), target: target.hash, name: input.name, value: input.value })
      const parsed = parseArtifact(a.bytes)
      return written(st, receive<TagArtifact>(st, {
        _tag: "TagArtifact", hash: a.hash, sender: sender(st, input.user), tags: tagCards(parsed),
        date: cardValue(parsed, "D") ?? "", user: input.user
      }))
    })
}) satisfies Partial<RepositoryService>

const putUnversioned = (st: Store): RepositoryService["putUnversioned"] => (input) =>
  Effect.gen(function*() {
    yield* checkUser(st, input.user)
    const content = Buffer.from(input.content)
    const hash = sha3(content)
    const file: UnversionedFile = {
      name: input.name, hash, size: content.length, mtime: Math.floor(Date.now() / 1000), rcvid: ++st.last.rcvid, sender: sender(st, input.user)
    }
    st.uv.set(input.name, { file, content })
    return { name: input.name, hash, rcvid: st.role === "served" ? file.rcvid : undefined, sender: file.sender }
  })

const put = (st: Store): RepositoryService["put"] => (user, artifact) =>
  Effect.gen(function*() {
    yield* checkUser(st, user)
    const existing = st.items.find((i) => i.hash === artifact.hash)
    if (existing !== undefined) return { ...written(st, existing), sent: false }
    const parsed = parseArtifact(artifact.bytes)
    const root = cardValue(parsed, "G")
    if (parsed.wiki === undefined) return yield* new InvalidInput({ field: "artifact", reason: "the test repository takes forum posts only" })
    return written(st, receive<Post>(st, {
      _tag: "Post", hash: artifact.hash, sender: sender(st, user), root: root ?? artifact.hash,
      inReplyTo: cardValue(parsed, "I"), editOf: cardValue(parsed, "P"), title: cardValue(parsed, "H"),
      text: parsed.wiki, mimetype: cardValue(parsed, "N") ?? "text/x-fossil-wiki", user: cardValue(parsed, "U") ?? ""
    }))
  })

export const make = (options: TestRepositoryOptions = {}): TestRepositoryHandle => {
  const items: Array<Item> = [...(options.seed ?? [])]
  const st: Store = {
    items,
    uv: new Map(),
    users: options.users ?? {},
    role: options.role ?? "served",
    last: { rid: items.reduce((m, i) => Math.max(m, i.rid), 0), rcvid: items.reduce((m, i) => Math.max(m, i.rcvid), 0) }
  }
  const putOne = put(st)
  const service: RepositoryService = {
    path: ":memory:",
    role: st.role,
    ...reads(st),
    ...peoplesWrites(st),
    putUnversioned: putUnversioned(st),
    withdraw: () => Effect.void,
    putAll: (user, artifacts) => Effect.forEach(artifacts, (artifact) => putOne(user, artifact)),
    put: putOne
  }
  return { service, items: () => st.items, receive: (item) => receive(st, item) }
}

export const layer = (options: TestRepositoryOptions = {}) => Layer.sync(Repository, () => make(options).service)
