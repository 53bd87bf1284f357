import * as LiveHosts from "../layers/LiveHosts.js"
import { main } from "../src/watcher/main.js"

main(process.argv.slice(2), LiveHosts.hosts)
