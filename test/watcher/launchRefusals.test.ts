import { describe, expect, it } from "vitest"
import { InvalidLaunchSpec, LimitUnavailable, SandboxPathRefused } from "../../services/SandboxLauncher.js"
import { refusal } from "../../src/protocol/Refusals.js"
import { refusalOfUnfit } from "../../src/watcher/LaunchPlan.js"

describe("what the launcher's check finds is the run's refusal", () => {
  it("a sandbox path is 7, a limit the host cannot keep 6, a malformed key 2", () => {
    expect(refusalOfUnfit(new SandboxPathRefused({ path: "/srv/x", resolved: "/srv/ocx/care", reason: "reaches OCX's own care" })))
      .toEqual(refusal(7, "/srv/x (/srv/ocx/care): reaches OCX's own care"))
    expect(refusalOfUnfit(new SandboxPathRefused({ path: "/srv/ocx/care", resolved: "/srv/ocx/care", reason: "is OCX's own" })))
      .toEqual(refusal(7, "/srv/ocx/care: is OCX's own"))
    expect(refusalOfUnfit(new LimitUnavailable({ which: "limits.memory", reason: "this host cannot provide it" })))
      .toEqual(refusal(6, "limits.memory: this host cannot provide it"))
    expect(refusalOfUnfit(new InvalidLaunchSpec({ key: "cwd", reason: "is not absolute" })))
      .toEqual(refusal(2, "cwd: is not absolute"))
  })
})
