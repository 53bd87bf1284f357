// `ocx2 supervise ...` is the node's resident supervisor (docs/architecture.md, "The supervisor"),
// a process that runs until it is stopped, not a call that answers: bin/ocx2.ts hands its
// arguments to src/node/Supervisor.ts. It is in the registry so that `ocx2 --help`, `ocx2 list`
// and `ocx2 help supervise` show it with the others; its handler is reached only when ocx2's own
// options come before its name, which it does not take.

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { defineTool } from "./Tool.js"

const text = (description: string) => Schema.optionalWith(Schema.String.annotations({ description }), { exact: true })

export const SuperviseInput = Schema.Struct({
  node: Schema.String.annotations({ description: "the node's user: the node hook --node USER started on this host" }),
  root: text("the release root whose node it supervises (by default the root this program was released into)"),
  repository: text("the served repository or the clone, when the node is that of more than one"),
  short_cycle: Schema.optionalWith(Schema.Boolean.annotations({
    description: "on a clone's host: pull every half second instead of holding a question open at the server's OCX page (for a proxy that cuts requests held open)"
  }), { exact: true }),
  stop: Schema.optionalWith(Schema.Boolean.annotations({
    description: "instead of supervising: end the node's resident processes on this host (its supervisor, spare watcher, stream server and " +
      "fast mode's poller; one a systemd unit runs is left to systemctl stop, named), leaving the watchers of running runs to answer them"
  }), { exact: true })
})

export const supervise = defineTool({
  name: "supervise",
  summary: "Run the node's resident supervisor: every receipt heard at once, its watchers kept as actors",
  description:
    "ocx2 supervise --node USER [--root ROOT] [--repository REPO] runs until it is stopped (a systemd service " +
    "runs it: docs/systemd/ocx2-supervise@.service). On the server's host it hears each receipt through inotify " +
    "and runs the node's round at once (the after-receive hook then only wakes it); on a clone's host it holds a " +
    "question open at the server's OCX page (receipt --newer-than N --wait S) and pulls the moment a receipt arrives, or " +
    "every half second with --short-cycle or a server whose page cannot hold it; a server that fails is tried again less often. It knows each watcher of the node by its pid, answers a run whose watcher died without " +
    "ended `lost` within a second, starts the runs waiting for a process user its holder freed, and, started " +
    "again, takes every live watcher back. Without it the node works as before. One runs per node and host; " +
    "`ocx2 supervise --node USER --stop` ends it with the node's spare, stream server and poller; " +
    "`ocx2 status` says whether it runs. It takes none of ocx2's own options (--json, --repository before its " +
    "name, --user).",
  input: SuperviseInput,
  positional: [],
  output: Schema.Struct({}),
  allow: () => undefined,
  offeredBy: ["cli"],
  notOfferedBecause: "it is a resident process of the node's host, started by its service manager",
  handle: () =>
    Effect.succeed({
      operations: [],
      stopped: {
        reason: "refused" as const,
        message: "ocx2 supervise takes none of ocx2's own options: run it as `ocx2 supervise --node USER [--root ROOT]` (ocx2 help supervise)"
      }
    })
})
