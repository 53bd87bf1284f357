import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { Repository } from "../../services/Repository.js"
import { type Artifact, composeForumPost, composeTicketChange } from "../fossil/Artifact.js"
import { processUserOf } from "../pickup/RunCheck.js"
import { writeMessage } from "../protocol/Envelope.js"
import { checkRun } from "../protocol/Refusals.js"
import { isAdminOrSetup } from "../protocol/Senders.js"
import { nodeActsAtOnce } from "./support/ActAtOnce.js"
import { finish, recording, refuse } from "../operations/Operations.js"
import { hostForCheck } from "./support/HostForCheck.js"
import { mergeFields, readPattern } from "./support/Pattern.js"
import { runToWriteAgain } from "./support/RunAgain.js"
import { servedFile } from "./support/RepositoryFile.js"
import { cloneUsersNow, localLayers } from "./support/ServedLayers.js"
import { needsAdminOrSetup } from "./support/Permissions.js"
import { defineTool } from "./Tool.js"

const optionalText = (description: string) => Schema.optionalWith(Schema.String.annotations({ description }), { exact: true })

export const CreateInput = Schema.Struct({
  pattern: optionalText(
    "the first layer of fields: an http(s) URL whose first fenced json block holds a run's fields, fetched without signing in; " +
      "or run/NAME (or this server's URL of it), a wiki page of the served repository, read as the newest version a user holding admin or setup wrote"
  ),
  again: optionalText(
    "write anew the run of this hash (or prefix) the served repository holds: its fields are the first layer and its to the node, " +
      "written where it is (a reply to it in its thread, or a change to its ticket) unless title, to or ticket says where"
  ),
  title: optionalText("write the run as the first post of a new thread with this title"),
  to: optionalText("write the run as a reply in the thread of this post (its hash or a prefix)"),
  ticket: optionalText("write the run as a change to this ticket (its id or a prefix)"),
  objective: optionalText("the run's objective"),
  node: optionalText("the node user the run is for: the run's to"),
  user: optionalText("the run's process.user"),
  fields: Schema.optionalWith(
    Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
      description: "the last layer: a JSON object of the run's fields, merged over the pattern and the fields named"
    }),
    { exact: true }
  )
})
export type CreateInput = typeof CreateInput.Type

export const CreateOutput = Schema.Struct({
  run: optionalText("the run's full hash (absent in a dry run)"),
  to: Schema.String.annotations({ description: "the node user the run is for" }),
  place: Schema.Literal("new thread", "reply", "ticket"),
  thread: optionalText("the thread's first post, for a reply (and the run itself, written as a new thread)"),
  ticket: optionalText("the ticket changed"),
  pattern: optionalText("where the pattern was read: its URL, or wiki/NAME of the served repository"),
  pattern_version: optionalText("the wiki version read, and its sender, for a pattern of the served repository"),
  again: optionalText("the run written again (its full hash)"),
  message: Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({ description: "the message written: {ocx, to, run}" }),
  acted: optionalText("what this host's node did at once")
})
export type CreateOutput = typeof CreateOutput.Type

export const create = defineTool({
  name: "create",
  summary: "Write a run",
  description:
    "Writes a run as your user on the served repository: the first post of a new thread (title), a reply in the thread of a " +
    "post (to) or a change to a ticket (ticket), named by hash or prefix. Its fields come in three layers, each over the one " +
    "before (an object over an object merges member by member; any other value replaces): the pattern (or again: a run the " +
    "repository holds, written anew where it is, for its node), then objective, node (the run's to) and user (process.user), then fields. clone defaults to the served repository's server-code. The run is " +
    "checked as its node checks it (the node of this host's hook on its own ROOT and host; a node elsewhere as far as this " +
    "host can see) and refused, writing nothing, with the node's note, if the node would refuse it. Needs admin " +
    "or setup; acts on the served repository (--repository on its host, or its web page).",
  input: CreateInput,
  positional: [],
  output: CreateOutput,
  allow: needsAdminOrSetup("create", "a node runs only what they send (or what capability-R.json allows an R sender)"),
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(
      act,
      Effect.flatMap(servedFile("create", context), (served) =>
        Effect.gen(function*() {
          const places = [input.title, input.to, input.ticket].filter((p) => p !== undefined).length
          if (places > 1 || (places === 0 && input.again === undefined)) {
            return yield* refuse("create writes a run in one place: give exactly one of title (a new thread), to (a reply in a post's thread) and ticket (a change to a ticket), or again alone (where that run is)")
          }
          if (input.again !== undefined && input.pattern !== undefined) return yield* refuse("again and pattern are each the first layer of the run's fields: give one of them")
          const user = context.caller.user
          if (user === undefined) return yield* refuse("create writes as your user, and this call names none: sign in")
          const repository = yield* Repository
          const again = input.again === undefined ? undefined : yield* runToWriteAgain(input.again, context.caller)
          if (again !== undefined) act.note("read", `the run ${again.run} for ${again.node}, to write it again`)
          const node = input.node ?? again?.node
          if (node === undefined) return yield* refuse("create needs node: the node user the run is for (the run's to)")
          const againPlace = places === 0 ? again?.place : undefined
          const replyTo = input.to ?? (againPlace !== undefined && "to" in againPlace ? againPlace.to : undefined)
          const ticketName = input.ticket ?? (againPlace !== undefined && "ticket" in againPlace ? againPlace.ticket : undefined)
          const sender = yield* repository.user(user)
          if (sender === undefined) return yield* refuse(`no user ${user} in the served repository ${served.path}`)
          // no node can answer a run for a user the repository lacks: it would wait for ever without a word
          if ((yield* repository.user(node)) === undefined) {
            return yield* refuse(`no user ${node} in the served repository ${served.path}: a run's to names the node user that will run it ` +
              `(fossil user new ${node} -R ${served.path}, with no capabilities, makes one)`)
          }

          // the three layers
          const pattern = input.pattern === undefined ? undefined : yield* readPattern(input.pattern, served.path, act)
          const named = {
            ...(input.objective !== undefined ? { objective: input.objective } : {}),
            ...(input.user !== undefined ? { process: { user: input.user } } : {})
          }
          let fields = mergeFields(mergeFields(pattern?.fields ?? again?.fields ?? {}, named), input.fields ?? {}) as Record<string, unknown>
          if (!Object.hasOwn(fields, "clone")) fields = { clone: (yield* repository.codes()).serverCode, ...fields }
          const message = { ocx: 2, to: node, run: fields }
          const text = writeMessage(message, again !== undefined ? `A run for ${node}, ${again.run} again.` : `A run for ${node}.`)

          // the artifact first: its hash is the run's, $$run$$ in the check
          const date = new Date()
          let artifact: Artifact
          let where: { place: CreateOutput["place"]; thread?: string; ticket?: string; words: string }
          if (input.title !== undefined) {
            if (input.title.trim() === "") return yield* refuse("title: a new thread needs a title")
            artifact = composeForumPost({ user, date, title: input.title, text })
            where = { place: "new thread", words: `a new thread "${input.title}"` }
          } else if (replyTo !== undefined) {
            const to = replyTo
            const post = (yield* repository.thread(to)).find((p) => p.hash === to || p.hash.startsWith(to))
            if (post === undefined) return yield* refuse(`no forum post named ${to} in the served repository`)
            artifact = composeForumPost({ user, date, root: post.root, replyTo: post.hash, text })
            where = { place: "reply", thread: post.root, words: `a reply to ${post.hash} in the thread of ${post.root}` }
          } else {
            const changes = yield* repository.ticket(ticketName!)
            const ticket = changes[0]?.ticket
            if (ticket === undefined) return yield* refuse(`no ticket named ${ticketName!} in the served repository`)
            artifact = composeTicketChange({ user, date, ticket, fields: { icomment: text } })
            where = { place: "ticket", ticket, words: `a change to ticket ${ticket}` }
          }

          // checked as the run's node checks it (2.14): where it is this host's hook's node, on its
          // ROOT and its host, by the same code; a node elsewhere, as far as this host can see
          const { host, whose } = yield* hostForCheck(served.path, node)
          const processUser = processUserOf({ block: message })
          const processUserCapabilities = processUser !== undefined ? (yield* repository.user(processUser))?.fullcap : undefined
          const checked = checkRun({
            message: { block: message },
            runHash: artifact.hash,
            sender: { login: user, capabilities: sender.fullcap },
            processUserCapabilities,
            cloneUsers: yield* cloneUsersNow,
            host
          })
          if (Either.isLeft(checked)) {
            return yield* refuse(`a node would refuse this run as written: refusal ${checked.left.number}: ${checked.left.note}`)
          }
          act.note("check", `a node would take it: refusals 1 to 7 hold for none (${whose})`)
          if (!isAdminOrSetup(sender.fullcap)) act.note("check", `${user} holds R alone: the run is within capability-R.json`)

          const written = yield* act(
            "write",
            `${where.words} as ${user}, holding a run for ${node}`,
            repository.put(user, artifact)
          )
          const acted = written === undefined
            ? undefined
            : yield* nodeActsAtOnce({ repository: served.path, run: written.hash, to: node, kind: "run" })
          const output: CreateOutput = {
            ...(written !== undefined ? { run: written.hash } : {}),
            to: node,
            place: where.place,
            ...(where.thread !== undefined ? { thread: where.thread } : written !== undefined && where.place === "new thread" ? { thread: written.hash } : {}),
            ...(where.ticket !== undefined ? { ticket: where.ticket } : {}),
            ...(pattern !== undefined ? { pattern: pattern.source } : {}),
            ...(pattern?.version !== undefined ? { pattern_version: `${pattern.version} by ${pattern.sender}` } : {}),
            ...(again !== undefined ? { again: again.run } : {}),
            message,
            ...(acted !== undefined ? { acted } : {})
          }
          return output
        }).pipe(Effect.provide(localLayers(served.path))))
    )
  }
})
