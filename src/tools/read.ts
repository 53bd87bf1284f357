import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type BetterSqlite3 from "better-sqlite3"
import { grants } from "../fossil/Fullcap.js"
import { isHashPrefix } from "../fossil/Hash.js"
import { capabilitiesReader, type MessageRow, type PostView, postMessage, threadPosts } from "../fossil/ReadMessages.js"
import {
  checkinView, fileBytes, isPrivate, resolveName, ticketView, unversionedEntry, verdictsAgainst
} from "../fossil/ReadRecord.js"
import { openDatabase } from "../fossil/Sqlite.js"
import { readMessage } from "../protocol/Envelope.js"
import { summarizeRuns } from "../runs/RunStates.js"
import { findCheckin } from "./support/Checkin.js"
import { RunRow, rowOf } from "./runs.js"
import { type Act, CallRefused, finish, recording } from "../operations/Operations.js"
import { nothingNamed } from "./support/NothingNamed.js"
import { repositoryFile, type RepositoryFile } from "./support/RepositoryFile.js"
import { type Caller, defineTool } from "./Tool.js"

const optionalText = (description: string) => Schema.optionalWith(Schema.String.annotations({ description }), { exact: true })

export const ReadInput = Schema.Struct({
  what: Schema.String.annotations({
    description: "what to read: a post, thread, run, ticket or check-in by its hash or a prefix of it (a ticket by its id), or the path of a file of the code"
  }),
  at: optionalText("the check-in a file is read at: a hash, a prefix or a branch name (trunk when not given)"),
  thread: Schema.optionalWith(Schema.Boolean.annotations({ description: "a post's whole thread, not the post alone" }), { exact: true })
})
export type ReadInput = typeof ReadInput.Type

export const PostOut = Schema.Struct({
  hash: Schema.String,
  kind: Schema.String.annotations({ description: "run, started, ended, stop, publish or another message's kind; kept logs or report (the node's plain replies); post" }),
  time: Schema.String.annotations({ description: "when it was received (ISO 8601, UTC); on a clone, the time its writer gave" }),
  sender: optionalText("who the served repository received it from"),
  user: Schema.String.annotations({ description: "who it says wrote it" }),
  in_reply_to: optionalText("the post it answers"),
  edit_of: optionalText("the version it replaces"),
  title: optionalText("its title (a thread's first post)"),
  mimetype: Schema.String,
  text: Schema.String
})
export type PostOut = typeof PostOut.Type

const FileOut = Schema.Struct({
  path: Schema.String,
  checkin: Schema.String.annotations({ description: "the check-in it was read at (full hash)" }),
  hash: Schema.String,
  size: Schema.Number.annotations({ description: "bytes" }),
  binary: Schema.Boolean.annotations({ description: "true: it holds a NUL byte, and its text is not given" }),
  text: optionalText("its text (UTF-8), up to 1 MiB"),
  cut: Schema.optionalWith(Schema.Boolean.annotations({ description: "true: the text is its first 1 MiB" }), { exact: true })
})

const CheckinOut = Schema.Struct({
  hash: Schema.String,
  branch: optionalText("its branch"),
  user: Schema.String,
  sender: optionalText("who the served repository received it from"),
  time: Schema.String,
  comment: Schema.String,
  parents: Schema.Array(Schema.String),
  tags: Schema.Array(Schema.Struct({ name: Schema.String, value: optionalText("the tag's value") })),
  files: Schema.Array(Schema.Struct({ path: Schema.String, hash: Schema.String }))
})

const TicketOut = Schema.Struct({
  id: Schema.String,
  fields: Schema.Record({ key: Schema.String, value: Schema.String }).annotations({ description: "its current fields" }),
  changes: Schema.Array(PostOut)
})

export const RunOut = Schema.Struct({
  summary: RunRow,
  content: Schema.Unknown.annotations({ description: "the run's own fields, as its message holds them" }),
  verdicts: Schema.Array(Schema.Struct({ checkin: Schema.String, value: Schema.String })).annotations({ description: "the ci verdicts written against it" }),
  published: Schema.Array(Schema.Struct({
    as: Schema.String, hash: optionalText("the unversioned file's hash, when the repository holds it"), size: Schema.optionalWith(Schema.Number, { exact: true })
  })).annotations({ description: "the unversioned files it names, as the repository holds them" })
})

export const ReadOutput = Schema.Struct({
  kind: Schema.Literal("post", "thread", "run", "ticket", "checkin", "file"),
  name: Schema.String.annotations({ description: "what was read: a full hash, a ticket id, or a path" }),
  posts: Schema.optionalWith(Schema.Array(PostOut).annotations({ description: "the post; a thread's or a run's posts in server order" }), { exact: true }),
  run: Schema.optionalWith(RunOut, { exact: true }),
  ticket: Schema.optionalWith(TicketOut, { exact: true }),
  checkin: Schema.optionalWith(CheckinOut, { exact: true }),
  file: Schema.optionalWith(FileOut, { exact: true })
})
export type ReadOutput = typeof ReadOutput.Type

const TEXT_BOUND = 1 << 20
const iso = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z")

const notYours = (what: string, letter: string, name: string) =>
  `${what} are not yours to read here: that needs Fossil's ${name} (${letter})`

/** What a post is, as a reader of the run sees it. */
const kindOf = (text: string, sender: string | undefined, node: string | undefined): string => {
  const reading = readMessage(text)
  if (reading._tag === "Message") return reading.kind
  if (node !== undefined && sender === node) return /^The process /.test(text) ? "kept logs" : "report"
  return "post"
}

const postOut = (post: PostView, node?: string): PostOut => ({
  hash: post.hash,
  kind: kindOf(post.text, post.sender ?? post.user, node),
  time: iso(post.time),
  ...(post.sender !== undefined ? { sender: post.sender } : {}),
  user: post.user,
  ...(post.inReplyTo !== undefined ? { in_reply_to: post.inReplyTo } : {}),
  ...(post.editOf !== undefined ? { edit_of: post.editOf } : {}),
  ...(post.title !== undefined ? { title: post.title } : {}),
  mimetype: post.mimetype,
  text: post.text
})

/** The run a message row holds, with its state from the rows beside it (its thread or ticket). */
const runOut = (db: BetterSqlite3.Database, file: RepositoryFile, row: MessageRow, rows: ReadonlyArray<MessageRow>, caller: Caller) => {
  const served = file.role === "served"
  const summary = summarizeRuns(rows, (r) => (served ? r.sender : r.user || undefined), capabilitiesReader(db)).find((s) => s.run === row.hash)!
  const content = row.message.content
  const named = typeof content === "object" && content !== null && Array.isArray((content as { process?: { unversioned_files?: unknown } }).process?.unversioned_files)
    ? ((content as { process: { unversioned_files: Array<{ as?: unknown }> } }).process.unversioned_files).flatMap((f) => (typeof f.as === "string" ? [f.as] : []))
    : []
  const mayReadCode = grants(caller.capabilities, "o")
  return {
    summary: rowOf(summary, Date.now()),
    content,
    verdicts: mayReadCode ? verdictsAgainst(db, row.hash) : [],
    published: mayReadCode
      ? named.map((as) => {
        const entry = unversionedEntry(db, as)
        return entry === undefined ? { as } : { as, hash: entry.hash, size: entry.size }
      })
      : []
  }
}

/** Reads what `what` names, as the caller may read it; a refusal says what is wrong. */
/** The repository file could not be read (not a refusal: nothing the caller gave is wrong). */
class ReadFailed extends Schema.TaggedError<ReadFailed>()("ReadFailed", { message: Schema.String }) {}

const readRecord = (file: RepositoryFile, input: ReadInput, caller: Caller, act: Act): ReadOutput => {
  const db = openDatabase(file.path, { readonly: true, fileMustExist: true })
  try {
    const o = { senders: file.role === "served" }
    const mayX = grants(caller.capabilities, "x")
    const what = input.what.trim()
    if (what === "") throw new CallRefused({ message: "what: name a post, thread, run, ticket or check-in, or a file's path" })
    const named = input.at === undefined && isHashPrefix(what) && what.length >= 4 ? resolveName(db, what) : undefined
    if (named?._tag === "Ambiguous") throw new CallRefused({ message: `${what} names more than one ${named.what}: give more digits` })
    if (named?._tag === "Other") throw new CallRefused({ message: `${named.hash} is ${named.what}; read reads posts, threads, runs, tickets, check-ins and files of the code` })

    if (named?._tag === "Post") {
      if (!grants(caller.capabilities, "2")) throw new CallRefused({ message: notYours("forum posts", "2", "Read Forum") })
      const posts = threadPosts(db, named.root, o).filter((p) => !p.private || mayX)
      const post = posts.find((p) => p.hash === named.hash)
      if (post === undefined) throw new CallRefused({ message: nothingNamed(what) })
      const rows = posts.map(postMessage).filter((r): r is MessageRow => r !== undefined)
      const title = posts[0]?.title
      const withTitle = rows.map((r) => ({ ...r, place: { _tag: "Thread" as const, root: posts[0]?.hash ?? r.hash, title } }))
      const own = withTitle.find((r) => r.hash === post.hash)
      if (own !== undefined && own.message.kind === "run" && own.message.to !== undefined) {
        act.note("read", `the run ${post.hash} and its thread (${posts.length} posts)`)
        return { kind: "run", name: post.hash, posts: posts.map((p) => postOut(p, own.message.to)), run: runOut(db, file, own, withTitle, caller) }
      }
      if (input.thread === true) {
        act.note("read", `the thread of ${post.hash} (${posts.length} posts)`)
        return { kind: "thread", name: posts[0]?.hash ?? post.hash, posts: posts.map((p) => postOut(p)) }
      }
      act.note("read", `the post ${post.hash}`)
      return { kind: "post", name: post.hash, posts: [postOut(post)] }
    }

    if (named?._tag === "Ticket") {
      if (!grants(caller.capabilities, "r")) throw new CallRefused({ message: notYours("tickets", "r", "Read Ticket") })
      const ticket = ticketView(db, named.ticket, o)
      const changes = ticket.changes.filter((c) => !c.private || mayX)
      if (named.change !== undefined && !changes.some((c) => c.hash === named.change)) throw new CallRefused({ message: nothingNamed(what) })
      const asPosts = changes.map((c): PostView => ({
        hash: c.hash, rid: c.rid, rcvid: c.rcvid, time: c.time, sender: c.sender, user: c.user, root: ticket.ticket,
        inReplyTo: undefined, editOf: undefined, title: undefined, mimetype: "text/x-markdown", text: c.text, private: c.private
      }))
      const rows: Array<MessageRow> = asPosts.flatMap((p) => {
        const row = postMessage(p)
        return row === undefined ? [] : [{ ...row, place: { _tag: "Ticket" as const, ticket: ticket.ticket } }]
      })
      const own = named.change !== undefined ? rows.find((r) => r.hash === named.change) : undefined
      const ticketOut = { id: ticket.ticket, fields: ticket.fields, changes: asPosts.map((p) => postOut(p, own?.message.to)) }
      if (own !== undefined && own.message.kind === "run" && own.message.to !== undefined) {
        act.note("read", `the run ${own.hash} and its ticket ${ticket.ticket} (${changes.length} changes)`)
        return { kind: "run", name: own.hash, ticket: ticketOut, run: runOut(db, file, own, rows, caller) }
      }
      act.note("read", `the ticket ${ticket.ticket} (${changes.length} changes)`)
      return { kind: "ticket", name: ticket.ticket, ticket: ticketOut }
    }

    // a hash that names nothing is not there, whatever the caller may read
    if (named?._tag === "None" && !grants(caller.capabilities, "o")) throw new CallRefused({ message: nothingNamed(what) })
    if (!grants(caller.capabilities, "o")) throw new CallRefused({ message: notYours("check-ins and files of the code", "o", "Read") })
    if (named?._tag === "Checkin") {
      if (isPrivate(db, named.rid) && !mayX) throw new CallRefused({ message: nothingNamed(what) })
      const c = checkinView(db, named.rid, named.hash, o)
      act.note("read", `the check-in ${c.hash} (${c.files.length} files)`)
      return {
        kind: "checkin", name: c.hash,
        checkin: {
          hash: c.hash, ...(c.branch !== undefined ? { branch: c.branch } : {}), user: c.user, ...(c.sender !== undefined ? { sender: c.sender } : {}),
          time: iso(c.time), comment: c.comment, parents: c.parents,
          tags: c.tags.map((t) => ({ name: t.name, ...(t.value !== undefined ? { value: t.value } : {}) })), files: c.files
        }
      }
    }

    // a path of the code at a check-in
    const at = input.at ?? "trunk"
    const found = findCheckin(file.path, at, file.role)
    if ("problem" in found) {
      throw new CallRefused({ message: named?._tag === "None" && input.at === undefined
        ? nothingNamed(what)
        : `at: ${found.problem}` })
    }
    const checkin = resolveName(db, found.hash)
    if (checkin._tag !== "Checkin" || (isPrivate(db, checkin.rid) && !mayX)) throw new CallRefused({ message: `at: no check-in named ${at} that you may read` })
    const path = what.replace(/^\.?\/+/, "")
    const files = checkinView(db, checkin.rid, checkin.hash, o).files
    const entry = files.find((f) => f.path === path)
    if (entry === undefined) {
      const within = files.filter((f) => f.path.startsWith(`${path.replace(/\/$/, "")}/`)).slice(0, 20).map((f) => f.path)
      throw new CallRefused({ message: named?._tag === "None"
        ? nothingNamed(what)
        : `no file ${path} in the check-in ${checkin.hash}${within.length > 0 ? `; it is a directory holding ${within.join(", ")}` : ""}` })
    }
    const bytes = fileBytes(db, entry.hash)
    if (bytes === undefined) throw new CallRefused({ message: `the file ${path} at ${checkin.hash} is a phantom: the repository knows its name but not its content` })
    const binary = bytes.subarray(0, 8000).includes(0)
    act.note("read", `${path} at the check-in ${checkin.hash} (${bytes.length} bytes)`)
    return {
      kind: "file", name: path,
      file: {
        path, checkin: checkin.hash, hash: entry.hash, size: bytes.length, binary,
        ...(binary ? {} : { text: bytes.subarray(0, TEXT_BOUND).toString("utf8") }),
        ...(!binary && bytes.length > TEXT_BOUND ? { cut: true } : {})
      }
    }
  } finally {
    db.close()
  }
}

export const read = defineTool({
  name: "read",
  summary: "Read the record or the code",
  description:
    "Reads a record of the repository, as your user may read it: a post (with thread, its whole thread), a ticket with " +
    "every change, a check-in with its files, or a run with its state, its thread (its started, ended, kept logs and the " +
    "rest), the ci verdicts written against it and the files it publishes; or a file of the code at a check-in (at, trunk " +
    "when not given), its text when it is not binary. Forum posts need Read Forum (2), tickets Read Ticket (r), check-ins and " +
    "files Read (o), private ones x. From inside a sandbox, through MCP, this is how a run's program reads the record. " +
    "Reads only, so it answers in a dry run too.",
  input: ReadInput,
  positional: ["what"],
  output: ReadOutput,
  allow: () => undefined,
  readOnly: true,
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(
      act,
      Effect.flatMap(repositoryFile("read", context), (file) =>
        Effect.try({
          try: () => readRecord(file, input, context.caller, act),
          catch: (e) => (e instanceof CallRefused ? e : new ReadFailed({ message: `the repository ${file.path} cannot be read: ${(e as Error).message}` }))
        }))
    )
  }
})
