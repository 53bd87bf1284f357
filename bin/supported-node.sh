# Sourced by bin/setup, bin/test, bin/demo and .ci/run (bash): puts the Node bin/setup brought into
# .node/ first on PATH, where it brought one (the host's Node older than 22, the floor). The Node
# first on PATH builds, runs the tests and the demo, and stages releases, whose programs then name it
# by its path.
ocx2_project=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -x "$ocx2_project/.node/bin/node" ]; then
  case ":$PATH:" in *":$ocx2_project/.node/bin:"*) ;; *) PATH="$ocx2_project/.node/bin:$PATH" ;; esac
  export PATH
  # native addons (better-sqlite3) built from source for it, with its own headers: no download
  export npm_config_nodedir="$ocx2_project/.node"
fi
