// The posts the repository benches measure: threads of 100, each opened by a run for `lab`
// (a post a node acts on) and answered 99 times with a line of text, as a busy forum is.
import { type Artifact, composeForumPost } from "../../src/fossil/Artifact.js"

export const composeThreads = (posts: number): Array<Artifact> => {
  const base = Date.parse("2026-01-01T00:00:00Z")
  const artifacts: Array<Artifact> = []
  for (let th = 0; th < posts / 100; th++) {
    const root = composeForumPost({ user: "alice", date: new Date(base + th * 1000), title: `Thread ${th}`, text: `run ${th}\n\`\`\`json\n{"ocx": 2, "to": "lab", "run": {"n": ${th}}}\n\`\`\`` })
    artifacts.push(root)
    for (let r = 1; r < 100; r++) {
      artifacts.push(composeForumPost({ user: "alice", date: new Date(base + th * 1000 + r), root: root.hash, replyTo: root.hash, text: `reply ${r} of ${th}: ${"x".repeat(80)}` }))
    }
  }
  return artifacts
}
