/** Defined as true by bin/build.mjs (esbuild's define) in every bundled program; absent from source. */
declare const OCX2_BUNDLED: boolean | undefined
