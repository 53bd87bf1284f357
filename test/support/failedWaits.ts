/**
 * A vitest setup file: a bare wait of the test worlds that ran out (test/support/explain.ts,
 * waitRanOut) prints what the open worlds saw when it ran out, once the test it was in has
 * failed; in a test that passes (a wait meant to run out) nothing. Outside a test (a beforeAll)
 * it prints at once.
 */
import { onTestFailed } from "vitest"
import { onWaitRanOut } from "./explain.js"

onWaitRanOut((text) => {
  try {
    onTestFailed(() => {
      console.error(text)
    })
  } catch {
    console.error(text)
  }
})
