// The suite's own settings (vitest.config.ts) with bench/suite's setup file, which records what
// each test file cost.
import { fileURLToPath } from "node:url"
import { defineConfig, mergeConfig } from "vitest/config"
import base from "../../vitest.config.js"

export default mergeConfig(base, defineConfig({
  root: fileURLToPath(new URL("../..", import.meta.url)),
  test: { setupFiles: ["bench/support/suiteCost.setup.ts"] }
}))
