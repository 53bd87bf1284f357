import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Repository } from "../../services/Repository.js"
import { composeTag } from "../fossil/Artifact.js"
import { runFossil } from "../fossil/Command.js"
import { isHashPrefix } from "../fossil/Hash.js"
import { countedVerdicts, formatVerdict, parseVerdict, type VerdictTagEvent } from "../protocol/Verdicts.js"
import { needsCheckIn } from "./support/Permissions.js"
import { findCheckin } from "./support/Checkin.js"
import { putAndPush } from "./support/ClonePush.js"
import { CallRefused, finish, recording, refuse } from "../operations/Operations.js"
import { repositoryFile, writingUser } from "./support/RepositoryFile.js"
import { localLayers } from "./support/ServedLayers.js"
import { defineTool } from "./Tool.js"

export const AuditInput = Schema.Struct({
  checkin: Schema.String.annotations({ description: "the check-in judged: a hash, a prefix of it, or a name such as a branch" }),
  verdict: Schema.Literal("pass", "fail").annotations({ description: "pass or fail" }),
  note: Schema.String.annotations({ description: "why, on one line" }),
  against: Schema.String.annotations({ description: "what it was judged against: a run's full hash, or the path of a file stating the objective, as it stands in the check-in" })
})

const Counted = Schema.Struct({
  sender: Schema.String,
  pass: Schema.Boolean,
  reason: Schema.String,
  against: Schema.String
})

export const AuditOutput = Schema.Struct({
  checkin: Schema.String.annotations({ description: "the check-in's full hash" }),
  value: Schema.String.annotations({ description: "the audited tag's value: pass|fail: NOTE (against AGAINST)" }),
  tag: Schema.optionalWith(Schema.String.annotations({ description: "the tag artifact's full hash (absent in a dry run)" }), { exact: true }),
  as: Schema.String.annotations({ description: "the user the verdict is written as" }),
  pushed: Schema.Boolean.annotations({ description: "true when pushed from a clone" }),
  verdicts: Schema.optionalWith(
    Schema.Array(Counted).annotations({ description: "the audited verdicts that count on the check-in, as the served repository holds them (read on its host)" }),
    { exact: true }
  )
})
export type AuditOutput = typeof AuditOutput.Type

export const audit = defineTool({
  name: "audit",
  summary: "Record a verdict",
  description:
    "Tags a check-in audited, a raw tag whose value is pass|fail: NOTE (against AGAINST), as your user. Nobody audits their own " +
    "check-in (the user it names, and the user the served repository received it from). On the served repository's host it is " +
    "written as the user named and read back from its tags, with the verdicts that count; from a clone it is made there and " +
    "pushed as the user the clone remembers, and a second push must send nothing. A later verdict of yours replaces the earlier. Needs Check-In (i).",
  input: AuditInput,
  positional: ["checkin", "verdict", "note", "against"],
  output: AuditOutput,
  allow: needsCheckIn("audit", "a verdict is a tag artifact the server must take from you"),
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(
      act,
      Effect.flatMap(repositoryFile("audit", context), (file) =>
        Effect.gen(function*() {
          const user = yield* writingUser("audit", context, file)
          const repository = yield* Repository
          if (input.note.trim() === "") return yield* refuse("note: a verdict says why; this note is empty")
          const against = input.against.trim()
          if (against === "") return yield* refuse("against: name the objective judged against, a run's full hash or a file's path")
          if (isHashPrefix(against) && against.length !== 40 && against.length !== 64) {
            return yield* refuse(`against: ${against} looks like a hash prefix; a run is named by its full hash`)
          }
          const found = yield* Effect.try({ try: () => findCheckin(file.path, input.checkin, file.role), catch: (e) => new CallRefused({ message: `${file.path}: ${(e as Error).message}` }) })
          if ("problem" in found) return yield* refuse(found.problem)
          if (found.user === user) return yield* refuse(`nobody audits their own check-in: ${found.hash} names ${user} as its user`)
          if (found.sender === user) return yield* refuse(`nobody audits their own check-in: the served repository received ${found.hash} from ${user}`)
          const value = formatVerdict({ pass: input.verdict === "pass", reason: input.note, against })
          if (parseVerdict(value)?.against !== against) return yield* refuse(`against: ${JSON.stringify(against)} would not be read back from the verdict`)
          const words = `the raw tag audited = "${value}" on ${found.hash} as ${user}`

          if (file.role === "served") {
            const written = yield* act("tag", words, repository.tag({ user, checkin: found.hash, name: "audited", value }))
            const tags = yield* repository.tags(found.hash)
            const events: Array<VerdictTagEvent> = tags.history.flatMap((artifact) =>
              artifact.tags.map((t) => ({
                tagName: t.name, value: t.value, cancel: t.op === "-", sender: artifact.sender,
                order: { rcvid: artifact.rcvid, rid: artifact.rid }, checkinSender: found.sender, checkinUser: found.user
              })))
            const verdicts = countedVerdicts(events).filter((v) => v.tag === "audited")
              .map((v) => ({ sender: v.sender, pass: v.pass, reason: v.reason, against: v.against }))
            if (written !== undefined && !verdicts.some((v) => v.sender === user && v.against === against && formatVerdict(v) === value)) {
              return yield* refuse(`the served repository holds the tag ${written.hash}, but not as ${user}'s latest verdict against ${against}`)
            }
            return { checkin: found.hash, value, ...(written !== undefined ? { tag: written.hash } : {}), as: user, pushed: false, verdicts } satisfies AuditOutput
          }
          const artifact = composeTag({ user, date: new Date(), target: found.hash, name: "audited", value })
          const pushed = yield* act("push", `${words}, put into ${file.path} and pushed to ${file.url}`, putAndPush(file, artifact))
          if (pushed !== undefined) {
            // read back: the server holds what it took, so a second push has nothing to send
            const again = yield* Effect.promise(() => runFossil(["push", "-R", file.path], { user }))
            const sent = /Artifacts sent:\s*(\d+)/.exec(`${again.stdout}${again.stderr}`)?.[1]
            if (sent !== "0") return yield* refuse(`the verdict is not given: a second push to ${file.url} still had ${sent ?? "an unknown number of"} artifacts to send`)
            act.note("read back", "a second push sent nothing: the server holds the verdict")
          }
          return { checkin: found.hash, value, ...(pushed !== undefined ? { tag: artifact.hash } : {}), as: user, pushed: true } satisfies AuditOutput
        }).pipe(Effect.provide(localLayers(file.path))))
    )
  }
})
