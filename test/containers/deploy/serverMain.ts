// A tool-container server of its own process for the test that kills it (bundled by the test):
// `node serverMain.mjs ROOT IMAGES.json DIST`, the images as deployWorld's TestImage; prints its URL.
import * as Fs from "node:fs"
import { makeDeployWorld, obtained, type TestImage } from "./deployWorld.js"

const [root, imagesFile, programs] = process.argv.slice(2)
const images = (JSON.parse(Fs.readFileSync(imagesFile!, "utf8")) as Array<TestImage>).map(obtained)
makeDeployWorld(root!, images, programs).then((w) => process.stdout.write(`listening on ${w.url}\n`))
