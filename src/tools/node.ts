import { NodeInput, NodeOutput, runCloneNode } from "../node/CloneNode.js"
import { defineTool } from "./Tool.js"

export const node = defineTool({
  name: "node",
  summary: "Be a node on another host",
  description:
    "ocx2 --repository CLONE node SERVER-URL PASSWORDS-FILE [--check]: the node of a clone on its own host, run from a " +
    "timer as often as the node should learn of new runs. PASSWORDS-FILE is {\"user\": LOGIN, \"password\": TEXT}, the node " +
    "user's password on the server, a regular file owned by this account and readable by it alone (chmod 600), outside " +
    "every path a run binds; CLONE is a clone made as that user with fossil clone --save-http-password. Each call signs " +
    "in to the server as the node user, pulls, asks the server who sent each run and stop the pull brought (the clone's " +
    "own receipts name only its pulls), and acts on them in the server's order as the server's hook does: refusals and " +
    "stops answered, each run it can start handed to a watcher that pushes every report to the server as the node user " +
    "and launches only once the server has received its started. --check (also taken on the first call, and after the " +
    "host restarted) acts on every open run for the node user: lost when its watcher is gone, a missed stop sent on, " +
    "one never started handed on. --root ROOT defaults to the root this program was released into.",
  input: NodeInput,
  positional: ["server_url", "passwords_file"],
  output: NodeOutput,
  // the passwords file, readable by this host account alone, is what lets a call act as the node
  allow: (caller) => (caller.sandboxed ? "node runs on its own host, never inside a run's sandbox" : undefined),
  offeredBy: ["cli"],
  notOfferedBecause: "it runs on its own host",
  handle: (input, context) => runCloneNode(input, context, process.argv[1])
})
