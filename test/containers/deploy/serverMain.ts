// A tool-container server of its own process for the test that kills it (bundled by the test):
// `node serverMain.mjs ROOT IMAGES.json DIST`, the images as deployWorld's TestImage; prints its URL.
// SIGTERM stops it as `ocx2-containers serve` stops: every container, and the spares, freed.
import * as Fs from "node:fs"
import { makeDeployWorld, obtained, type TestImage } from "./deployWorld.js"

const [root, imagesFile, programs] = process.argv.slice(2)
const images = (JSON.parse(Fs.readFileSync(imagesFile!, "utf8")) as Array<TestImage>).map(obtained)
makeDeployWorld(root!, images, programs).then((w) => {
  process.once("SIGTERM", () => void w.close().then(() => process.exit(0)))
  process.stdout.write(`listening on ${w.url}\n`)
})
