import { main } from "../src/watcher/main.js"

main(process.argv.slice(2))
