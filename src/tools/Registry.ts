import { makeHelp, makeList } from "./catalog.js"
import { accept } from "./accept.js"
import { attach } from "./attach.js"
import { audit } from "./audit.js"
import { containers } from "./containers.js"
import { supervise } from "./supervise.js"
import { create } from "./create.js"
import { doctor } from "./doctor.js"
import { echo } from "./echo.js"
import { gitExport } from "./export.js"
import { hook } from "./hook.js"
import { gitImport } from "./import.js"
import { init } from "./init.js"
import { metrics } from "./metrics.js"
import { node } from "./node.js"
import { post } from "./post.js"
import { read } from "./read.js"
import { receipt } from "./receipt.js"
import { rollback } from "./rollback.js"
import { run } from "./run.js"
import { runs } from "./runs.js"
import { stage } from "./stage.js"
import { status } from "./status.js"
import { stop } from "./stop.js"
import type { Tool } from "./Tool.js"
import { unhook } from "./unhook.js"
import { watch } from "./watch.js"

/** Every tool this release offers, in the order lists show them. */
export const tools: ReadonlyArray<Tool> = [
  makeList(() => tools),
  makeHelp(() => tools),
  status,
  doctor,
  echo,
  create,
  run,
  stop,
  runs,
  metrics,
  read,
  watch,
  attach,
  post,
  audit,
  receipt,
  stage,
  accept,
  rollback,
  node,
  init,
  hook,
  unhook,
  gitExport,
  gitImport,
  containers,
  supervise
]
