/**
 * Who may call a tool, in the same words from every entry point: the capability checks several
 * tools' `allow` share, and who may read a run where it is.
 */
import { grants } from "../../fossil/Fullcap.js"
import type { RunSummary } from "../../runs/RunStates.js"
import type { Caller } from "../Tool.js"

export const hasCapability = (caller: Caller, letters: string): boolean =>
  [...letters].some((letter) => caller.capabilities.includes(letter))

/** stage, accept, rollback, hook, unhook, export and import each need Fossil's setup capability, and say so in these words. */
export const needsSetup = (tool: string) => (caller: Caller): string | undefined =>
  hasCapability(caller, "s") ? undefined : `${tool} needs Fossil's setup capability (s)`

/** What a node acts on only from admin or setup (a run, a stop) needs one of them to write. */
export const needsAdminOrSetup = (tool: string, why: string) => (caller: Caller): string | undefined =>
  hasCapability(caller, "as") ? undefined : `${tool} needs Fossil's admin (a) or setup (s) capability: ${why}`

/** Pushing an artifact, from a clone or into the served file, is Fossil's Check-In (i). */
export const needsCheckIn = (tool: string, alternative: string) => (caller: Caller): string | undefined =>
  hasCapability(caller, "ias") ? undefined : `${tool} needs Fossil's Check-In capability (i): ${alternative}`

/** Whether the caller may read a run where it is, as Fossil decides it: forum posts need 2, tickets r, private x. */
export const mayReadRun = (caller: Caller, run: Pick<RunSummary, "place" | "private">): boolean =>
  grants(caller.capabilities, run.place._tag === "Ticket" ? "r" : "2") && (!run.private || grants(caller.capabilities, "x"))
