import { describe, expect, it } from "vitest"
import { checkPath } from "../../src/sandbox/MountPlan.js"

// Refusal 7 at the launch (2.8): $$release$$ may be bound read-only, as 2.19's session example
// does, although ROOT/ocx2-hook and ROOT/current, both OCX's own, lead into it once their links
// are followed; bound read-write, or anything else of ROOT, it is refused.

const root = "/srv/ocx2"
const release = `${root}/staged/0123456789ab`
// OCX's own paths as the launcher is given them: links followed (ROOT/current and ROOT/ocx2-hook lead into the release)
const own = [`${root}/care`, `${root}/settings`, release, `${root}/staged`, `${release}/ocx2-hook`, `${root}/node`]
const context = { own, workspace: `${root}/builder/projects/p/RUN`, release }

describe("refusal 7 at the launch: $$release$$", () => {
  it("the release and what lies within it may be bound read-only", () => {
    expect(checkPath("read_only", "$$release$$", release, context)).toBeUndefined()
    expect(checkPath("read_only", "$$release$$/ocx2", `${release}/ocx2`, context)).toBeUndefined()
  })
  it("not read-write, and not ROOT's other files", () => {
    expect(checkPath("read_write", "$$release$$", release, context)?.message).toContain("it is OCX's own")
    expect(checkPath("read_only", `${root}/staged`, `${root}/staged`, context)?.message).toContain("OCX's own")
    expect(checkPath("read_only", `${root}/care`, `${root}/care`, context)?.message).toContain("it is OCX's own")
  })
})
