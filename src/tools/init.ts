// init (issue 40): a node on this host in one command, as docs/operations.md "Installing" says it
// step by step; the steps themselves are in support/NodeInit.ts.

import { InitInput, InitOutput, initNode } from "./support/NodeInit.js"
import { defineTool } from "./Tool.js"

export const init = defineTool({
  name: "init",
  summary: "Set up a node on this host in one command: users, server URL, release, hook, supervisor, pages, stream",
  description:
    "Sets up the node of the served repository (the global --repository) on this host as docs/operations.md describes, " +
    "and says each step, each looking first (\"already\" where it holds, nothing changed): the node user --node USER (made " +
    "where missing, holding no capability of its own); a process user for runs where asked (--process-user NAME, made " +
    "holding o and i); the server URL (--server-url URL, else the repository's email-url or base-url, else a fossil server " +
    "serving the repository, found in /proc); the release root --root ROOT (a release it serves, or one staged and accepted " +
    "from --from CHECKOUT); the hook (hook --node USER --fast: the node starting, fast pickup); the supervisor (a systemd unit " +
    "from docs/systemd, written and enabled, where systemd runs as PID 1; detached otherwise, saying so; --supervisor " +
    "systemd|detached chooses); the extension root's links ocx2-cgi, ocx2-cgi-next and git (--extroot DIR, else the " +
    "server's --extroot); the stream server's fixed port (ROOT/settings/stream) and default-csp's connect-src for it. " +
    "A step that cannot be done is named with what to do instead; the steps that need it are skipped, named; the others " +
    "go on. --dry-run says each step it would take and takes none. Exit status 0 when every step is done or already so, " +
    "1 otherwise. With --clone URL --passwords FILE, a clone's host (docs/operations.md, \"A node on another host\"): the " +
    "passwords file checked, the clone made as ROOT/clones/NODE.fossil with its password saved, the release root, ocx2 node " +
    "URL FILE --check (the clone registered, the node starting), and the supervisor. On the server's host it needs Fossil's " +
    "setup capability (s); on a clone's host, the node user's password on the server.",
  input: InitInput,
  positional: [],
  output: InitOutput,
  // the server's host needs setup, checked by the handler (as hook's words say it); a clone's host has no
  // repository to ask before its clone is made: the node user's password on the server is its check
  allow: () => undefined,
  offeredBy: ["cli"],
  notOfferedBecause: "it sets up the host it runs on: users, programs, services and links",
  exitStatus: (output) => (output.ok ? 0 : 1),
  handle: (input, context) => initNode(input, context, process.argv[1])
})
