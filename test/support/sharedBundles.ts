/**
 * vitest's global setup: a directory where the run's files leave the bundles they make of an entry
 * point (test/adapters/extServer.ts `bundle`), so each is bundled once per run instead of once per
 * file. The workers read its path from OCX2_TEST_BUNDLES; it goes when the run ends.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export default function setup(): () => void {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-bundles-"))
  process.env.OCX2_TEST_BUNDLES = dir
  return () => Fs.rmSync(dir, { recursive: true, force: true })
}
