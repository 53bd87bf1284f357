#!/usr/bin/env node
// A watcher program that never writes `started`: it is started for its run as the real one is,
// takes nothing and writes nothing, and sleeps until it is ended. OCX2_TEST_WATCHER names it to
// the test world (test/support/world.ts, makeReleaseRoot) for test/support/lost-run, which shows
// what a test prints when a run is lost rather than slow. No test of the suite uses it.
setInterval(() => {}, 1 << 30)
