import { hookStatus, RootOnlyInput, StatusOutput } from "./support/HookSetup.js"
import { defineTool } from "./Tool.js"

export const status = defineTool({
  name: "status",
  summary: "Show who is calling and where the hook stands",
  description:
    "Says who is calling (user and capabilities); what gives each limit on this host (processes and memory: the cgroup " +
    "v1 or v2 controller; cpu and file_size: prlimit) or why it is not available (such a limit is refused, refusal 6), " +
    "from the node's measure in ROOT/node/capabilities.json where it has one; and, on the served repository (the global " +
    "--repository), where the hook " +
    "stands: installed as this root installs it, ocx2-hook run otherwise, or absent; the programs the other after-receive " +
    "hooks run; when Fossil's backoffice runs hooks (fast: backoffice-disable on and a poller running, the node's ROOT/ocx2-hook --poll " +
    "or Fossil's own fossil backoffice --poll, which refuses people's posts now and then and is named; " +
    "default: at most once a minute); the node it is; the hook's last run from ROOT/node/hook.log with the artifacts " +
    "it was given; whether the node's supervisor (ocx2 supervise) runs, its pid and the watchers it holds; and the " +
    "sessions in ROOT/care, with the runs waiting for their process user; and ROOT's room (disk): its free space against " +
    "ROOT/settings/min-free-space (1 GiB unless set), below which the node holds new runs back, and whether a run waits. Anyone may call it.",
  input: RootOnlyInput,
  positional: [],
  output: StatusOutput,
  allow: () => undefined,
  readOnly: true,
  handle: (input, context) => hookStatus(input, context, process.argv[1])
})
