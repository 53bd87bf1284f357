/**
 * A test's own program bundled as bin/build.mjs bundles a plain ES module program: one file
 * whose `require` is made for it (a bundle may require Node's modules and the externals), which
 * offers its own import() for bundles beside it (src/Siblings.ts). `bundled` defines OCX2_BUNDLED,
 * as the build does, for a program that imports its siblings or its helper as bundles.
 */
import { build } from "esbuild"

export const bundleProgram = (
  entry: string,
  outfile: string,
  options: { readonly external?: ReadonlyArray<string>; readonly bundled?: boolean; readonly logLevel?: "warning" | "error" } = {}
) =>
  build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile,
    external: [...(options.external ?? [])],
    logLevel: options.logLevel ?? "warning",
    ...(options.bundled === true ? { define: { OCX2_BUNDLED: "true" } } : {}),
    banner: {
      js: "import { createRequire as __ocx2CreateRequire } from 'node:module'; const require = __ocx2CreateRequire(import.meta.url); globalThis.__ocx2Import ??= (url) => import(url);"
    }
  })
