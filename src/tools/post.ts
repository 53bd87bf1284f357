import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Repository } from "../../services/Repository.js"
import { composeForumPost, composeTicketChange } from "../fossil/Artifact.js"
import { holdsMessage } from "../protocol/Envelope.js"
import { putAndPush } from "./support/ClonePush.js"
import { finish, recording, refuse } from "../operations/Operations.js"
import { repositoryFile, writingUser } from "./support/RepositoryFile.js"
import { localLayers } from "./support/ServedLayers.js"
import { needsCheckIn } from "./support/Permissions.js"
import { defineTool } from "./Tool.js"

export const PostInput = Schema.Struct({
  to: Schema.String.annotations({ description: "the post whose thread the text joins, or the ticket it changes: a hash or a prefix" }),
  text: Schema.String.annotations({ description: "the text, Markdown; it may hold no OCX message" })
})

export const PostOutput = Schema.Struct({
  place: Schema.Literal("reply", "ticket"),
  to: Schema.String.annotations({ description: "the post answered, or the ticket changed, in full" }),
  thread: Schema.optionalWith(Schema.String.annotations({ description: "the thread's first post" }), { exact: true }),
  post: Schema.optionalWith(Schema.String.annotations({ description: "the full hash of what was written (absent in a dry run)" }), { exact: true }),
  as: Schema.String.annotations({ description: "the user it is written as" }),
  pushed: Schema.Boolean.annotations({ description: "true when pushed from a clone, false when written on the served repository" })
})
export type PostOutput = typeof PostOutput.Type

export const post = defineTool({
  name: "post",
  summary: "Write a plain post",
  description:
    "Writes TEXT as your user: a reply in the thread of the post TO names, or a change to the ticket it names, by hash or " +
    "prefix. From a clone (--repository CLONE) the reply is composed as Fossil's forum artifact, put into the clone and " +
    "pushed as the user the clone remembers; on the served repository's host it is written as the user named. Refuses text " +
    "that holds an OCX message (create writes a run, stop a stop). Needs Check-In (i); a push the server refuses is reported.",
  input: PostInput,
  positional: ["to", "text"],
  output: PostOutput,
  allow: needsCheckIn("post", "without it, post in Fossil's own forum page"),
  offeredBy: ["cli", "mcp"], notOfferedBecause: "on the web, post in Fossil's own forum page",
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(
      act,
      Effect.flatMap(repositoryFile("post", context), (file) =>
        Effect.gen(function*() {
          if (holdsMessage(input.text)) {
            return yield* refuse("post writes plain posts, and this text holds an OCX message (a json block with \"ocx\"): create writes a run, stop a stop")
          }
          if (input.text.trim() === "") return yield* refuse("text: a post says something; this text is empty")
          const user = yield* writingUser("post", context, file)
          const repository = yield* Repository
          // TO names a post, or else a ticket
          const thread = yield* repository.thread(input.to).pipe(
            Effect.catchTag("NotFound", () => Effect.succeed(undefined))
          )
          const named = thread?.find((p) => p.hash === input.to || p.hash.startsWith(input.to))
          const ticket = named !== undefined
            ? undefined
            : (yield* repository.ticket(input.to).pipe(Effect.catchTag("NotFound", () => Effect.succeed([]))))[0]?.ticket
          if (named === undefined && ticket === undefined) return yield* refuse(`no forum post or ticket named ${input.to} in ${file.path}`)
          const words = named !== undefined ? `a reply to ${named.hash} in the thread of ${named.root}` : `a change to ticket ${ticket!}`
          const place = {
            place: named !== undefined ? ("reply" as const) : ("ticket" as const),
            to: named?.hash ?? ticket!,
            ...(named !== undefined ? { thread: named.root } : {})
          }

          if (file.role === "served") {
            const written = yield* act(
              "write",
              `${words} as ${user}, on the served repository`,
              named !== undefined
                ? Effect.map(repository.reply({ user, to: named.hash, text: input.text }), (w) => w.hash)
                : Effect.map(repository.ticketChange({ user, ticket: ticket!, fields: { icomment: input.text } }), (w) => w.hash)
            )
            return { ...place, ...(written !== undefined ? { post: written } : {}), as: user, pushed: false } satisfies PostOutput
          }
          const date = new Date()
          const artifact = named !== undefined
            ? composeForumPost({ user, date, root: named.root, replyTo: named.hash, text: input.text })
            : composeTicketChange({ user, date, ticket: ticket!, fields: { icomment: input.text } })
          const pushed = yield* act("push", `${words} as ${user}, put into ${file.path} and pushed to ${file.url}`, putAndPush(file, artifact))
          return { ...place, ...(pushed !== undefined ? { post: artifact.hash } : {}), as: user, pushed: true } satisfies PostOutput
        }).pipe(Effect.provide(localLayers(file.path))))
    )
  }
})
