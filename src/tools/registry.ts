import { makeHelp, makeList } from "./catalog.js"
import { accept } from "./accept.js"
import { echo } from "./echo.js"
import { rollback } from "./rollback.js"
import { stage } from "./stage.js"
import type { Tool } from "./Tool.js"

/** Every tool this release offers, in the order lists show them. */
export const tools: ReadonlyArray<Tool> = [
  makeList(() => tools),
  makeHelp(() => tools),
  echo,
  stage,
  accept,
  rollback
]
