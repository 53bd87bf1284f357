// How many times a crash test repeats each of its cases. In the suite a case is repeated as often
// as what it proves needs (a moment swept along a hand-off, a fixed point a few times), since each
// repetition costs a hook, a watcher and a sandbox; OCX2_CRASH_REPEATS=N repeats every case at least
// N times (10 before a release: `OCX2_CRASH_REPEATS=10 npx vitest run test/node/supervisorCrash.test.ts
// test/node/cloneSupervisor.test.ts test/watcher/crash.test.ts`).

const asked = Number(process.env.OCX2_CRASH_REPEATS ?? "")

/** `inSuite`, or more when OCX2_CRASH_REPEATS asks for more */
export const repeats = (inSuite: number): number => (Number.isInteger(asked) && asked > inSuite ? asked : inSuite)

/** a case's time-out, grown with its repetitions beyond the suite's */
export const timeoutFor = (inSuite: number, suiteMs: number): number => Math.ceil((suiteMs * repeats(inSuite)) / inSuite)
