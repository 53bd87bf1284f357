import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Receipts } from "../../services/Receipts.js"
import { Repository } from "../../services/Repository.js"
import { grants } from "../fossil/Fullcap.js"
import { readMessage } from "../protocol/Envelope.js"
import { processUserOf } from "../pickup/RunCheck.js"
import { finish, recording, refuse } from "../operations/Operations.js"
import { listenerAddressFor } from "../listen/ListenFiles.js"
import { servedFile } from "./support/RepositoryFile.js"
import { localLayers } from "./support/ServedLayers.js"
import { defineTool } from "./Tool.js"

/** The longest a long poll is held: under the 30 s after which proxies commonly cut a quiet request. */
const maxWaitSeconds = 25
/** The most artifacts an answer's arrived lists: past it, complete is false and the rest are asked by artifacts. */
const maxArrived = 200

export const ReceiptInput = Schema.Struct({
  artifacts: Schema.optionalWith(
    Schema.Array(Schema.String).annotations({ description: "the artifacts asked about, each by its full hash" }),
    { exact: true }
  ),
  capabilities_of: Schema.optionalWith(Schema.String.annotations({ description: "a user whose capabilities on the server are asked" }), { exact: true }),
  newer_than: Schema.optionalWith(
    Schema.Int.pipe(Schema.nonNegative()).annotations({
      description: "a receipt number: the answer's newest says the served repository's newest receipt number, and with wait it is given once that is no longer this number"
    }),
    { exact: true }
  ),
  wait: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(0, maxWaitSeconds)).annotations({
      description: `with newer-than: how many seconds at most to wait for a receipt newer than it (0 to ${maxWaitSeconds}; 0 when not given)`
    }),
    { exact: true }
  ),
  arrived: Schema.optionalWith(
    Schema.Boolean.annotations({
      description: "with newer-than: the answer's arrived also says what a clone's node needs to decide what was received after newer-than " +
        "(the receipts of its posts, ticket changes and check-ins, and the capabilities of the process users its runs to you name), in the same request"
    }),
    { exact: true }
  )
})

export const ReceiptRow = Schema.Struct({
  hash: Schema.String,
  received: Schema.Boolean.annotations({ description: "false: not received, or not for you to see" }),
  sender: Schema.optionalWith(Schema.String.annotations({ description: "the user the served repository received it from" }), { exact: true }),
  capabilities: Schema.optionalWith(Schema.String.annotations({ description: "what the sender may do there (fullcap)" }), { exact: true }),
  rcvid: Schema.optionalWith(Schema.Number.annotations({ description: "its receipt's number" }), { exact: true }),
  rid: Schema.optionalWith(Schema.Number.annotations({ description: "its row number: server order is (rcvid, rid)" }), { exact: true })
})
export type ReceiptRow = typeof ReceiptRow.Type

export const ArrivedOutput = Schema.Struct({
  receipts: Schema.Array(ReceiptRow).annotations({
    description: `the receipts of the posts, ticket changes and check-ins received after newer-than up to newest, in server order (at most ${maxArrived}; only those you may see)`
  }),
  process_users: Schema.Array(Schema.Struct({
    user: Schema.String,
    capabilities: Schema.optionalWith(Schema.String.annotations({ description: "fullcap; absent when there is no such user" }), { exact: true })
  })).annotations({ description: "the process users named by the runs among them sent to you, with their capabilities" }),
  complete: Schema.Boolean.annotations({ description: "false: more arrived than the answer holds; ask the rest by artifacts" })
})
export type ArrivedOutput = typeof ArrivedOutput.Type

export const ReceiptOutput = Schema.Struct({
  receipts: Schema.Array(ReceiptRow),
  capabilities_of: Schema.optionalWith(
    Schema.Struct({
      user: Schema.String,
      capabilities: Schema.optionalWith(Schema.String.annotations({ description: "fullcap; absent when there is no such user" }), { exact: true })
    }),
    { exact: true }
  ),
  newest: Schema.optionalWith(
    Schema.Number.annotations({ description: "the served repository's newest receipt number, when newer-than was given (absent for a caller without Read)" }),
    { exact: true }
  ),
  arrived: Schema.optionalWith(ArrivedOutput, { exact: true }),
  listener: Schema.optionalWith(
    Schema.String.annotations({
      description: "with newer-than, from the web page: where the fleet's listener on the server's host holds the same question for the caller in " +
        "one resident process (POST there what was posted here, with the same sign-in); absent when none runs for this repository"
    }),
    { exact: true }
  )
})
export type ReceiptOutput = typeof ReceiptOutput.Type

export const receipt = defineTool({
  name: "receipt",
  summary: "Say who sent an artifact",
  description:
    "Says of each artifact, by its full hash, who the served repository received it from, what they may do there (fullcap), " +
    "its receipt's number and its row number (server order), or that it has not received it; capabilities-of USER, what USER " +
    "may do there; newer-than N, the newest receipt's number, and with wait S the answer is held until a receipt newer than N " +
    "arrives or S seconds pass (a long poll: a clone's supervisor pulls the moment it answers), and with arrived the answer also " +
    "gives the receipts of what was received after N and the capabilities of the process users its runs to the caller name (what the " +
    "supervisor's round would ask next, in the same request). It never says where an artifact came from. A caller without Read (o), or without x for a private artifact, " +
    "is told it was not received, and is not told a user's capabilities. Reads the served repository (--repository on its host, " +
    "or its web page) and changes nothing, so it answers in a dry run too.",
  input: ReceiptInput,
  positional: [],
  output: ReceiptOutput,
  allow: () => undefined,
  readOnly: true,
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(
      act,
      Effect.flatMap(servedFile("receipt", context), (served) =>
        Effect.gen(function*() {
          const artifacts = input.artifacts ?? []
          if (input.wait !== undefined && input.newer_than === undefined) {
            return yield* refuse("wait is how long to wait for a receipt newer than newer-than: give newer-than N with it")
          }
          if (input.arrived !== undefined && input.newer_than === undefined) {
            return yield* refuse("arrived says what was received after newer-than: give newer-than N with it")
          }
          if (artifacts.length === 0 && input.capabilities_of === undefined && input.newer_than === undefined) {
            return yield* refuse("receipt answers about artifacts, a user or the newest receipt: give artifacts, capabilities-of or newer-than")
          }
          const receipts = yield* Receipts
          const repository = yield* Repository
          // The caller's own rule as the served repository has it (an unknown or anonymous viewer
          // is nobody), and never more than the entry point authenticated.
          const caller = context.caller.user !== undefined && (yield* repository.user(context.caller.user)) !== undefined
            ? context.caller.user
            : "nobody"
          const mayRead = grants(context.caller.capabilities, "o")
          const answers = yield* receipts.receipts(artifacts, { caller })
          const rows = answers.map((answer): ReceiptRow =>
            answer._tag === "Received" && mayRead
              ? { hash: answer.hash, received: true, sender: answer.sender, capabilities: answer.capabilities, rcvid: answer.rcvid, rid: answer.rid }
              : { hash: answer.hash, received: false })
          if (artifacts.length > 0) act.note("read", `the receipts of ${artifacts.length} artifact${artifacts.length === 1 ? "" : "s"} in ${served.path}`)
          let capabilitiesOf: ReceiptOutput["capabilities_of"]
          if (input.capabilities_of !== undefined) {
            const login = input.capabilities_of
            const capabilities = mayRead ? yield* receipts.capabilitiesOf(login, { caller }) : undefined
            capabilitiesOf = { user: login, ...(capabilities !== undefined ? { capabilities } : {}) }
            act.note("read", `the capabilities of ${login}`)
          }
          let newest: number | undefined
          if (input.newer_than !== undefined && mayRead) {
            newest = yield* receipts.newest(input.newer_than, (input.wait ?? 0) * 1000, { caller })
            act.note("read", `the newest receipt's number${input.wait !== undefined && input.wait > 0 ? `, waiting up to ${input.wait} s for one newer than ${input.newer_than}` : ""}`)
          }
          let arrived: ArrivedOutput | undefined
          if (input.arrived === true && input.newer_than !== undefined && newest !== undefined) {
            arrived = newest > input.newer_than
              ? yield* arrivedBetween(input.newer_than, newest, caller, context.caller.user)
              : { receipts: [], process_users: [], complete: true }
            act.note("read", `the receipts of ${arrived.receipts.length} artifacts received after ${input.newer_than} and ${arrived.process_users.length} process users' capabilities`)
          }
          // the fleet's listener, where one runs beside this page's release: the caller's next held question goes there
          const listener = newest !== undefined && context.entryPoint === "cgi" ? listenerAddressFor(process.argv[1], served.path, context.origin) : undefined
          return {
            receipts: rows,
            ...(capabilitiesOf !== undefined ? { capabilities_of: capabilitiesOf } : {}),
            ...(newest !== undefined ? { newest } : {}),
            ...(arrived !== undefined ? { arrived } : {}),
            ...(listener !== undefined ? { listener } : {})
          } satisfies ReceiptOutput
        }).pipe(Effect.provide(localLayers(served.path))))
    )
  }
})

/**
 * What a clone's round would ask after its pull, for what was received after `after` up to `newest`:
 * the receipts (sender, capabilities, place) of the posts, ticket changes and check-ins, and the
 * capabilities of the process users the runs to `node` name. The runs are read here only to know
 * whose capabilities to give: the clone reads its own pulled copy, and takes from this answer only
 * what the server's receipts and user table say. Hidden artifacts are left out, as receipts hides them.
 */
export const arrivedBetween = (after: number, newest: number, caller: string, node: string | undefined) =>
  Effect.flatMap(arrivedItems(after, newest), (read) => arrivedFor(read, caller, node))

/** What was received after `after` up to `newest`, as read for every caller alike (the fleet's listener reads it once for all). */
export const arrivedItems = (after: number, newest: number) =>
  Effect.gen(function*() {
    const repository = yield* Repository
    const batch = yield* repository.readAfter({ rcvid: after, rid: Number.MAX_SAFE_INTEGER }, maxArrived)
    const items = batch.items.filter((i) => i.rcvid <= newest && i._tag !== "TagArtifact")
    return { items, complete: !batch.more || batch.cursor.rcvid > newest }
  })
export type ArrivedItems = Effect.Effect.Success<ReturnType<typeof arrivedItems>>

/** The arrived answer for one caller (what it may see) and its node (the process users of the runs to it). */
export const arrivedFor = ({ items, complete }: ArrivedItems, caller: string, node: string | undefined) =>
  Effect.gen(function*() {
    const receipts = yield* Receipts
    const answers = items.length === 0 ? [] : yield* receipts.receipts(items.map((i) => i.hash), { caller })
    const seen = answers.flatMap((a) => (a._tag === "Received" ? [a] : []))
    const visible = new Set(seen.map((a) => a.hash))
    const named = new Set<string>()
    for (const item of items) {
      if (!visible.has(item.hash) || (item._tag !== "Post" && item._tag !== "TicketChange")) continue
      const reading = readMessage(item.text)
      if (reading._tag !== "Message" || reading.kind !== "run" || node === undefined || reading.to !== node) continue
      const user = processUserOf(reading)
      if (user !== undefined) named.add(user)
    }
    const processUsers: Array<ArrivedOutput["process_users"][number]> = []
    for (const user of named) {
      const capabilities = yield* receipts.capabilitiesOf(user, { caller })
      processUsers.push({ user, ...(capabilities !== undefined ? { capabilities } : {}) })
    }
    return {
      receipts: seen.map((a): ReceiptRow => ({ hash: a.hash, received: true, sender: a.sender, capabilities: a.capabilities, rcvid: a.rcvid, rid: a.rid })),
      process_users: processUsers,
      complete
    } satisfies ArrivedOutput
  })
