// The watcher's program, started once per run (or waiting as the node's spare): given the
// watcher's host alone (layers/WatcherHost.ts), so that its bundle holds no layer it never uses
// (the node's rounds', a tool call's, the release roots') and each run pays for no more.
import * as WatcherHost from "../layers/WatcherHost.js"
import { main } from "../src/watcher/main.js"

main(process.argv.slice(2), WatcherHost.hosts)
