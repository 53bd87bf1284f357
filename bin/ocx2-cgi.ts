// Served from Fossil's extension root (see docs in src/adapters/Cgi.ts). Fossil clears the
// environment, so the executable in the extension root names node by its full path.
// `ocx2-cgi --stream-server` is the node's stream server (src/follow/StreamServer.ts), which the
// run page starts when it needs one: the root is its own program's, never a request's.
//
// This program only chooses which bundle beside it answers: a receipt question (PATH_INFO
// /receipt, which a clone's node asks for every sign-in check, long poll and write confirmation)
// runs ocx2-cgi-receipt, the CGI with the receipt tool alone; anything else runs ocx2-cgi-pages,
// every tool and page. Each request starts a process, so what it loads is what it costs.
import { cgiPages, cgiReceipt } from "../src/Bundles.js"

/** The tool a request names, as the CGI adapter reads PATH_INFO (src/adapters/Cgi.ts). */
const toolAsked = (process.env.PATH_INFO ?? "").replace(/^\/+/, "").replace(/\/+$/, "")

const pages = () => cgiPages.load()
const receiptPage = () => cgiReceipt.load()

if (process.argv.includes("--stream-server")) {
  pages().then((loaded) => loaded.runRootStreamServer()).catch((e) => {
    console.error(`the stream server failed: ${(e as Error).message}`)
    process.exit(1)
  })
} else {
  const answered = toolAsked === "receipt" ? receiptPage().then((page) => page.runReceiptPage()) : pages().then((loaded) => loaded.runPages())
  answered.then(
    () => process.exit(0),
    // only a bundle missing beside this program gets here (runCgi answers every failure itself)
    (e: unknown) => {
      const message = `the OCX pages failed: ${(e as Error)?.message ?? String(e)}`
      console.error(message)
      process.stdout.write(`Status: 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n${message}\n`, () => process.exit(1))
    }
  )
}
