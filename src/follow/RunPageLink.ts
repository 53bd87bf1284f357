// Where a run's page is, for the link the node writes in its started, so that the thread links to
// it: the OCX pages served from the server's extension root as ext/ocx2-cgi (docs/operations.md),
// a path from the repository's top, which Fossil's Markdown resolves against where it is served.

export const runPagePath = (run: string): string => `/ext/ocx2-cgi/watch?run=${run}`
