import { serveGit } from "../src/git/GitServe.js"

// The extension root's git program (served as `git`, and `git-next` from the release offered as
// next): the served repository's git export, read-only over git's smart HTTP (src/git/GitServe.ts).
process.stdout.on("error", () => {})
serveGit(process.env, process.stdin, process.stdout).then(
  () => process.stdout.end(() => process.exit(0)),
  (e: unknown) => {
    process.stdout.write(`Status: 500 Internal Server Error\r\nContent-Type: text/plain\r\n\r\n${e instanceof Error ? e.message : String(e)}\n`)
    process.stdout.end(() => process.exit(0))
  }
)
