// The receipt tool's page alone, as a bundle of its own: a clone's node asks it over HTTP for
// every sign-in check, long poll and write confirmation (layers/RemoteReceipts.ts), so each
// question starts this program. bin/ocx2-cgi.ts runs it for POST and GET of PATH_INFO /receipt;
// it answers exactly as the whole pages would (the same CGI adapter, the same tool), without
// loading and running every other tool and page. test/architecture/cgiReceiptBundle.test.ts
// keeps it lean.

import * as ReleaseRootFs from "../layers/ReleaseRootFs.js"
import { runCgi } from "../src/adapters/Cgi.js"
import { receipt } from "../src/tools/receipt.js"

/** Answers the CGI request in this process's environment: its path is the receipt tool's. */
export const runReceiptPage = (program: string | undefined = process.argv[1]): Promise<void> =>
  runCgi([receipt], ReleaseRootFs.layer, process.env, program)
