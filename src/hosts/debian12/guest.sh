#!/bin/bash
# The host check inside the Debian 12 guest (bin/hosts), run at every boot by ocx2-hostcheck.service
# from the host's share /mnt/host (the guest's Node in node/, the staged release in release/, the
# units in systemd/), as root. Installs as docs/operations.md says, then proves limits and crash
# safety against this guest's systemd and cgroup v2. Every line it says goes to /mnt/host/out/log;
# PASS and FAIL lines name their proof and its time. The first boot ends in a reboot with a run in
# flight; the second checks what the node did after it and ends in a hard reset (the host's QEMU
# monitor, asked through out/reset-request) with another run in flight; the third checks that one,
# then powers off.
set -u
S=/mnt/host OUT=/mnt/host/out
REPO=/var/lib/fossil/served.fossil ROOT=/srv/ocx2 URL=http://127.0.0.1:8080/
# The account that runs the server and the node. The shipped units say User=fossil, but a node that
# is not root measures no sandbox (layers/BwrapSandbox.ts: setpriv --reuid 65534 needs root), so every
# sandboxed run is refused 6; the check runs them as root through drop-ins (OCX2_HOSTS_ACCOUNT=fossil
# in the host's environment shows the refusal).
ACCOUNT=$(cat /mnt/host/account 2>/dev/null || echo root)
NODE=/usr/local/lib/ocx2-node/bin/node
SUP=ocx2-supervise@lab.service
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "hostcheck: $*" | tee -a $OUT/log; }
detail() { echo "  $*" | tee -a $OUT/log; }
verdict() { # NAME START STATUS WHAT
  if [ "$3" = 0 ]; then say "PASS $1 ($(since "$2") s): $4"; else say "FAIL $1 ($(since "$2") s): $4"; fi
}
ROOT_OCX=/usr/local/sbin/ocx-hostcheck
# the release's ocx2 as the account that runs the server, signed in as the setup user alice
ocx() { local p=$ROOT/current/ocx2; [ -e "$p" ] || p=$ROOT/next/ocx2; runuser -u $ACCOUNT -- "$p" --repository $REPO --user alice "$@"; }
# the run's fields: a shell script in the sandbox as uid 65534, as the tests' shellRun writes them
runFields() { # SCRIPT LIMITS-JSON
  printf '{"clone":"%s","objective":"host check","workspace":[{"step":"directory","at":"$$root$$/work/$$run$$"}],"sandbox":{"uid":%s,"gid":%s,"linux_capabilities":[],"network":false,"isolate_terminal":true,"ends_with_parent":true,"proc":"/proc","dev":"/dev","tmp":"/tmp","read_only":["/usr","/bin","/lib","/lib64","/etc"],"read_write":["$$workspace$$"],"homes":[],"created_files":[]},"limits":%s,"process":{"user":"builder","command":["sh","-c",%s],"env":{"PATH":"/usr/bin:/bin"}}}' \
    "$(runuser -u $ACCOUNT -- fossil sql -R $REPO "SELECT value FROM config WHERE name='server-code'" | tr -d "'")" 65534 65534 "$2" "$($NODE -p 'JSON.stringify(process.argv[1])' "$1")"
}
post() { # TITLE SCRIPT LIMITS: the run's full hash
  local prefix
  prefix=$(timeout 120 $NODE $S/post.mjs post $URL alice alice-pw "$1" "$(runFields "$2" "$3")") || { detail "post of '$1' failed or hung"; return 1; }
  runuser -u $ACCOUNT -- fossil sql -R $REPO "SELECT uuid FROM blob WHERE uuid GLOB '$prefix*'" | tr -d "'" | tee -a $OUT/runs
}
thread() { timeout 150 $ROOT_OCX --json read "$1" --thread 2>/dev/null | $NODE $S/post.mjs thread; }
waitFor() { # SECONDS COMMAND...: until the command succeeds
  local end=$(( $(date +%s) + $1 )); shift
  until "$@"; do [ "$(date +%s)" -ge $end ] && return 1; sleep 1; done
}
endedIn() { thread "$1" | grep -q 'ended=[1-9]'; }
startedIn() { thread "$1" | grep -q 'started=[1-9]'; }
group() { echo "/sys/fs/cgroup$(systemctl show -P ControlGroup "$1")"; }

# OCX2_HOSTS_ONLY on the host (bin/hosts writes it to the share): the proofs to run, for working on
# one of them ("6", "1 5"); the install always. The check proper runs them all
ONLY=$(cat $S/only 2>/dev/null)
want() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }
state=$(cat $OUT/state 2>/dev/null || echo fresh)
say "boot ($state): up $(cut -d' ' -f1 /proc/uptime) s; $(systemctl --version | head -1); /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup/); $(uname -r)"

if [ "$state" = fresh ]; then
  # ---------------------------------------------------------------- install, as docs/operations.md
  t=$(now)
  (
    set -ex
    install -D -m 755 $S/node/bin/node $NODE
    ln -sf $NODE /usr/local/bin/node
    printf '#!/bin/sh\np=%s/current/ocx2; [ -e "$p" ] || p=%s/next/ocx2\nexec runuser -u %s -- "$p" --repository %s --user alice "$@"\n' $ROOT $ROOT $ACCOUNT $REPO > $ROOT_OCX
    chmod 755 $ROOT_OCX
    useradd --system --create-home --home-dir /var/lib/fossil --shell /bin/sh fossil
    chown $ACCOUNT: /var/lib/fossil && chmod 755 /var/lib/fossil
    runuser -u $ACCOUNT -- fossil init -A alice $REPO
    runuser -u $ACCOUNT -- fossil user password alice alice-pw -R $REPO
    runuser -u $ACCOUNT -- fossil user new lab lab lab-pw -R $REPO
    runuser -u $ACCOUNT -- fossil user new builder builder builder-pw -R $REPO
    runuser -u $ACCOUNT -- fossil sql -R $REPO "UPDATE user SET cap='' WHERE login='lab'; UPDATE user SET cap='oi' WHERE login='builder'"
    runuser -u $ACCOUNT -- fossil settings email-url $URL -R $REPO
    # the release root, with the release bin/hosts staged (ocx2 stage) on the host: ROOT/staged/NAME, next
    name=$(cat $S/release-name)
    install -d -o $ACCOUNT -g $ACCOUNT -m 755 $ROOT $ROOT/staged
    cp -a $S/release $ROOT/staged/$name
    # the programs name the Node that staged them by its path on the host: the guest's Node is there too
    staging=$(head -1 $ROOT/staged/$name/ocx2 | cut -c3-)
    mkdir -p "$(dirname "$staging")" && ln -sf $NODE "$staging"
    ln -s staged/$name $ROOT/next
    chown -R $ACCOUNT: $ROOT
    ocx accept --root $ROOT
    # as an operator's shell runs it, outside this check's own service (a login session's scope): the
    # poller hook --fast starts detached is then nobody's unit, as on a real host
    systemd-run --scope --quiet --collect --unit=ocx2-hostcheck-operator -- runuser -u $ACCOUNT -- $ROOT/current/ocx2 --repository $REPO --user alice hook --node lab --root $ROOT --fast
    mkdir -p /var/lib/fossil/ext
    ln -s $ROOT/current/ocx2-cgi /var/lib/fossil/ext/ocx2-cgi
    ln -s $ROOT/next/ocx2-cgi /var/lib/fossil/ext/ocx2-cgi-next
    mkdir -p /etc/ocx2
    echo "OCX2_ROOT=$ROOT" > /etc/ocx2/supervise.env
    install -m 644 $S/systemd/*.service $S/systemd/*.timer /etc/systemd/system/
    # drop-ins as docs/operations.md says ("systemd older than 254"): the account, and on systemd 252
    # the node in a delegated scope of its own (the unit's group, started again at each restart,
    # must never hand memory to children)
    for u in fossil-server@ ocx2-backoffice@ ocx2-supervise@; do
      mkdir -p /etc/systemd/system/$u.service.d
      [ $ACCOUNT != fossil ] && printf '[Service]\nUser=%s\nEnvironment=USER=%s\n' $ACCOUNT $ACCOUNT > /etc/systemd/system/$u.service.d/account.conf
      if [ "$(systemctl --version | head -1 | cut -d' ' -f2)" -lt 254 ]; then
        cmd=$(grep '^ExecStart=' /etc/systemd/system/$u.service | cut -d= -f2-)
        printf '[Service]\nExecStart=\nExecStart=/usr/bin/systemd-run --scope --quiet --collect -p Delegate=yes %s\n' "$cmd" > /etc/systemd/system/$u.service.d/scope.conf
      fi
    done
    systemctl daemon-reload
    systemctl enable --now fossil-server@served.service ocx2-backoffice@served.service $SUP
  ) > $OUT/install.log 2>&1
  st=$?
  waitFor 60 $NODE -e "fetch('$URL').then(r => process.exit(r.status < 500 ? 0 : 1), () => process.exit(1))"
  verdict install "$t" $st "Node $($NODE -v), release $(basename "$(readlink -f $ROOT/current)"), units $(systemctl is-active fossil-server@served ocx2-backoffice@served $SUP | tr '\n' ' ')(log: out/install.log)"
  [ $st = 0 ] || { tail -15 $OUT/install.log | while read -r l; do detail "$l"; done; }
  # ---------------------------------------------------------------- proof 1: limits
  if want 1; then
  t=$(now)
  # dd holds a 200 MB buffer and writes every page of it
  mem=$(post "memory 64M touches 200 MB" 'dd if=/dev/zero of=/dev/null bs=200M count=1; echo survived' '{"wall":"2m","memory":"64M"}')
  # a fork bomb as the seed's limits test makes it: more children than processes allows; dash's fork fails
  fork=$(post "fork bomb under processes 16" 'for i in $(seq 40); do sleep 30 & done; wait' '{"wall":"1m","processes":16}')
  waitFor 240 endedIn "$mem"; waitFor 120 endedIn "$fork"
  m=$(thread "$mem"); f=$(thread "$fork")
  detail "memory run $mem: $m"; detail "fork bomb $fork: $f"
  # what the shell said when fork failed: the kept stderr in the thread
  forkErr=$(ocx --json read "$fork" --thread 2>/dev/null | grep -oi 'cannot fork[^"\\]*' | head -1)
  status=$(ocx status --root $ROOT 2>&1)
  echo "$status" > $OUT/status.txt
  cp $ROOT/node/capabilities.json $OUT/ 2>/dev/null
  detail "the node's measure: $(tr -d '\n' < $ROOT/node/capabilities.json 2>/dev/null | cut -c1-600)"
  detail "$(echo "$status" | grep -E '^\s+(memory|processes):' | tr -s ' ' | tr '\n' ';')"
  ok=0
  # the ended names the limit in its note (2.9)
  echo "$m" | grep -qE 'started=1 ended=1 outcome=budget .*(limit=memory|note="memory")' || ok=1
  echo "$f" | grep -q 'started=1 ended=1 outcome=exited limit= exit=2' || ok=1
  echo "$status" | grep -qE 'memory: cgroup v2 memory' || ok=1
  echo "$status" | grep -qE 'processes: cgroup v2 pids' || ok=1
  verdict "1 limits" "$t" $ok "memory 64M run ended budget naming memory; fork bomb under processes 16 ended exited 2 (its stderr: ${forkErr:-no fork error kept}); status names cgroup v2 for memory and processes"
  fi
  # ---------------------------------------------------------------- proof 2: systemd 252 without DelegateSubgroup
  if want 2; then
  t=$(now)
  G=$(group $SUP)
  mp=$(systemctl show -P MainPID $SUP)
  B=/sys/fs/cgroup$(cut -d: -f3 /proc/$mp/cgroup); B=${B%/ocx2-node}
  {
    echo "systemctl show -p Delegate,DelegateSubgroup,ControlGroup $SUP:"; systemctl show -p Delegate,DelegateSubgroup,ControlGroup $SUP
    echo "the unit's group: $G: cgroup.procs [$(cat $G/cgroup.procs | tr '\n' ' ')] cgroup.subtree_control [$(cat $G/cgroup.subtree_control)]"
    echo "the supervisor (pid $mp) is in $(cut -d: -f3 /proc/$mp/cgroup); the node's base: $B"
    echo "$B/cgroup.controllers: $(cat $B/cgroup.controllers)"
    echo "$B/cgroup.subtree_control: $(cat $B/cgroup.subtree_control)"
    echo "$B/cgroup.procs: $(cat $B/cgroup.procs | tr '\n' ' ')"
    echo "$B/ocx2-node/cgroup.procs: $(cat $B/ocx2-node/cgroup.procs 2>/dev/null | tr '\n' ' ')"
    journalctl -b -u $SUP --no-pager | grep -i delegatesubgroup | tail -1
  } > $OUT/cgroups.txt 2>&1
  while read -r l; do detail "$l"; done < $OUT/cgroups.txt
  ok=0
  grep -q 'Delegate=yes' $OUT/cgroups.txt || ok=1
  echo " $(cat $B/cgroup.subtree_control) " | grep -q ' memory ' || ok=1
  echo " $(cat $B/cgroup.subtree_control) " | grep -q ' pids ' || ok=1
  [ -z "$(cat $B/cgroup.procs)" ] || ok=1
  grep -qx "$mp" $B/ocx2-node/cgroup.procs || ok=1
  # the unit's own group never hands memory down: systemd can start the unit there again
  echo " $(cat $G/cgroup.subtree_control) " | grep -q ' memory ' && ok=1
  verdict "2 systemd $(systemctl --version | head -1 | cut -d' ' -f2) Delegate=yes without DelegateSubgroup" "$t" $ok "the supervisor in ocx2-node of its delegated base ($B), memory and pids enabled there, the base holding no process; the unit's own group gives no memory"
  fi
  # ---------------------------------------------------------------- proof 3: the supervisor SIGKILLed
  if want 3; then
  t=$(now)
  # the supervisor alone (--kill-who=main): its watchers go on; then the whole unit (systemctl kill's
  # default, --kill-who=all): where the watchers are in the unit's group they die too, and their runs
  # are answered lost; in the node's scope (systemd < 254) they are not the unit's and go on
  before=$(systemctl show -P NRestarts $SUP); pid=$(systemctl show -P MainPID $SUP)
  main=$(post "runs through its supervisor's SIGKILL" 'sleep 15; echo done' '{"wall":"2m"}')
  waitFor 120 startedIn "$main"
  systemctl kill -s KILL --kill-who=main $SUP
  waitFor 30 sh -c "[ \"\$(systemctl show -P NRestarts $SUP)\" -gt $before ] && systemctl is-active -q $SUP"
  waitFor 120 endedIn "$main"
  m=$(thread "$main"); detail "after systemctl kill -s KILL --kill-who=main: $main: $m"
  np=$(systemctl show -P MainPID $SUP)
  detail "restarted: MainPID $np in $(cut -d: -f3 /proc/$np/cgroup 2>/dev/null); the unit's group: procs [$(cat $(group $SUP)/cgroup.procs | tr '\n' ' ')] subtree_control [$(cat $(group $SUP)/cgroup.subtree_control)]"
  journalctl -b -u $SUP --no-pager | tail -5 | while read -r l; do detail "journal: $l"; done
  tail -5 $ROOT/node/supervisor.log 2>/dev/null | while read -r l; do detail "supervisor.log: ${l:0:200}"; done
  echo "$m" | grep -q 'started=1 ended=1 outcome=exited limit= exit=0' || k3=1
  before=$(systemctl show -P NRestarts $SUP)
  long=$(post "runs through its unit's SIGKILL" 'sleep 20; echo done' '{"wall":"2m"}')
  waitFor 120 startedIn "$long"
  systemctl kill -s KILL $SUP
  during=$(post "posted while the supervisor is down" 'echo hello' '{"wall":"1m"}')
  waitFor 30 sh -c "[ \"\$(systemctl show -P NRestarts $SUP)\" -gt $before ] && systemctl is-active -q $SUP"
  after=$(post "posted after the supervisor came back, memory 64M" 'dd if=/dev/zero of=/dev/null bs=200M count=1; echo survived' '{"wall":"1m","memory":"64M"}')
  waitFor 120 endedIn "$long"; waitFor 60 endedIn "$during"; waitFor 60 endedIn "$after"
  ok=0
  for r in "$mem" "$fork" "$main" "$long" "$during" "$after"; do
    s=$(thread "$r"); detail "$r: $s"
    echo "$s" | grep -q 'started=1 ended=1' || ok=1
  done
  detail "$SUP: NRestarts $before -> $(systemctl show -P NRestarts $SUP), MainPID $pid -> $(systemctl show -P MainPID $SUP), $(systemctl is-active $SUP); its group: $(cat $(group $SUP)/cgroup.procs | wc -l) processes in the unit's own group, subtree_control $(cat $(group $SUP)/cgroup.subtree_control)"
  journalctl -b -u $SUP --no-pager > $OUT/supervise.journal 2>&1
  systemctl is-active -q $SUP || ok=1
  [ "$(systemctl show -P NRestarts $SUP)" -gt "$before" ] || ok=1
  [ -z "${k3:-}" ] || ok=1
  thread "$after" | grep -qE 'outcome=budget .*(limit=memory|note="memory")' || { ok=1; detail "the memory limit after the restart: $(thread "$after")"; }
  verdict "3 systemctl kill -s KILL $SUP" "$t" $ok "Restart=always brought it back both times (--kill-who=main, then all: the unit's processes; the watchers, in the node's scope, are not the unit's); the run through the supervisor's SIGKILL ended exited 0, a run after the restarts still got its memory limit (budget); every run has exactly one started and one ended"
  fi
  # ---------------------------------------------------------------- proof 5: the Fossil server restarted mid-run
  if want 5; then
  t=$(now)
  # KillMode=process: the server's restart ends the server alone; the run's watcher writes its
  # answers into the repository file itself, and the next posts reach the server started again
  through=$(post "runs through a restart of the Fossil server" 'sleep 15; echo done' '{"wall":"2m"}')
  waitFor 120 startedIn "$through"
  serverBefore=$(systemctl show -P MainPID fossil-server@served.service)
  systemctl restart fossil-server@served.service; rs=$?
  waitFor 60 $NODE -e "fetch('$URL').then(r => process.exit(r.status < 500 ? 0 : 1), () => process.exit(1))"
  serverAfter=$(systemctl show -P MainPID fossil-server@served.service)
  afterRestart=$(post "posted after the Fossil server's restart" 'echo hello' '{"wall":"1m"}')
  waitFor 120 endedIn "$through"; waitFor 120 endedIn "$afterRestart"
  a=$(thread "$through"); b=$(thread "$afterRestart")
  detail "systemctl restart fossil-server@served (exit $rs): MainPID $serverBefore -> $serverAfter, $(systemctl is-active fossil-server@served.service)"
  detail "$through: $a"; detail "$afterRestart: $b"
  ok=0
  [ $rs = 0 ] && [ "$serverBefore" != "$serverAfter" ] || ok=1
  echo "$a" | grep -q 'started=1 ended=1 outcome=exited limit= exit=0' || ok=1
  echo "$b" | grep -q 'started=1 ended=1 outcome=exited limit= exit=0' || ok=1
  verdict "5 systemctl restart fossil-server@served mid-run" "$t" $ok "the run through the restart ended exited 0 with one started and one ended; a run posted after it was started and ended"
  fi
  # ---------------------------------------------------------------- proof 6: systemctl stop of the node mid-run
  if want 6; then
  t=$(now)
  # docs/operations.md "Stopping a node": systemctl stop of the supervisor's and the poller's units
  # ends the supervisor, its spare and fast mode's poller; the watchers of running runs are left
  # alone (KillMode=process) and answer their runs with the node down
  pollers() { for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -qE 'ocx2-hook(\.mjs)? --poll' && echo ${p#/proc/}; done; }
  running=$(post "runs through systemctl stop of the node" 'sleep 90; echo done' '{"wall":"4m"}')
  waitFor 120 startedIn "$running"
  watcher=$(cat $ROOT/care/$running.lock 2>/dev/null)
  supPid=$(systemctl show -P MainPID $SUP)
  # the spare the hand-off leaves: started after the run was taken
  waitFor 60 sh -c "s=\$(cat $ROOT/care/spare/lock 2>/dev/null); [ -n \"\$s\" ] && [ \"\$s\" != \"$watcher\" ] && kill -0 \$s 2>/dev/null"
  spare=$(cat $ROOT/care/spare/lock 2>/dev/null)
  before=$(pollers | tr '\n' ' ')
  detail "before: the supervisor $supPid, its spare ${spare:-none}, the run's watcher ${watcher:-none}, pollers [${before}]"
  unitPoller=$(systemctl show -P MainPID ocx2-backoffice@served.service)
  systemctl stop $SUP ocx2-backoffice@served.service; st=$?
  waitFor 60 sh -c "! kill -0 $supPid 2>/dev/null && ! kill -0 ${spare:-0} 2>/dev/null && ! kill -0 $unitPoller 2>/dev/null"
  alive() { kill -0 "$1" 2>/dev/null && echo alive || echo ended; }
  # the watcher is alive, or has answered its run already: a watcher killed with the node leaves no ended
  watcherOk() { [ "$(alive ${watcher:-0})" = alive ] || thread "$running" | grep -q 'ended=1 outcome=exited limit= exit=0'; }
  ok=0
  watcherOk || ok=1
  left=$(pollers | tr '\n' ' ')
  detail "after systemctl stop (exit $st): the supervisor $(alive $supPid), the spare $(alive ${spare:-0}), the unit's poller $unitPoller $(alive $unitPoller), pollers left [${left}], the watcher ${watcher:-none} $(alive ${watcher:-0}); units $(systemctl is-active $SUP ocx2-backoffice@served | tr '\n' ' ')"
  # a poller hook --fast started detached at install, before the unit was enabled, is not the unit's:
  # "Stopping a node" ends it with --stop, which leaves the watchers of running runs alone too
  stopped=$(runuser -u $ACCOUNT -- $ROOT/current/ocx2-supervise --node lab --root $ROOT --stop 2>&1); sst=$?
  echo "$stopped" | while read -r l; do detail "ocx2-supervise --stop: $l"; done
  left=$(pollers | tr '\n' ' ')
  detail "after --stop (exit $sst): pollers left [${left}], the watcher ${watcher:-none} $(alive ${watcher:-0})"
  [ $st = 0 ] && [ $sst = 0 ] || ok=1
  [ -n "$watcher" ] && [ -n "$spare" ] || ok=1
  [ "$(alive $supPid)" = ended ] && [ "$(alive ${spare:-0})" = ended ] && [ "$(alive $unitPoller)" = ended ] && [ -z "$left" ] || ok=1
  watcherOk || ok=1
  waitFor 120 endedIn "$running"
  r=$(thread "$running"); detail "$running, answered with the node stopped: $r"
  echo "$r" | grep -q 'started=1 ended=1 outcome=exited limit= exit=0' || ok=1
  systemctl start $SUP ocx2-backoffice@served.service || ok=1
  afterStart=$(post "posted after the node was started again" 'echo hello' '{"wall":"1m"}')
  waitFor 120 endedIn "$afterStart"
  r=$(thread "$afterStart"); detail "$afterStart: $r"
  echo "$r" | grep -q 'started=1 ended=1 outcome=exited limit= exit=0' || ok=1
  verdict "6 systemctl stop of the node mid-run" "$t" $ok "systemctl stop $SUP ocx2-backoffice@served ended the supervisor, its spare and the unit's poller, ocx2-supervise --stop the poller hook --fast had started detached; the running run's watcher was left alone and answered it exited 0 (one started, one ended); started again, the node ran the next run"
  fi
  if ! want 4; then say "done (only $ONLY)"; systemctl poweroff; exit 0; fi
  # ---------------------------------------------------------------- proof 4, first half: reboot with a run in flight
  t=$(now)
  flight=$(post "in flight across a reboot" 'sleep 600' '{"wall":"15m"}')
  waitFor 120 startedIn "$flight"
  detail "in flight: $flight: $(thread "$flight")"
  # the node down (its supervisor and poller stopped; KillMode=process leaves the watcher), a run posted meanwhile
  systemctl stop $SUP ocx2-backoffice@served.service
  down=$(post "posted while the node is down" 'echo hello' '{"wall":"1m"}')
  detail "posted while the node is down: $down: $(thread "$down")"
  echo "$flight $down" > $OUT/flight
  echo rebooted > $OUT/state
  say "rebooting (systemctl reboot) with $flight in flight and $down waiting"
  sync
  systemctl reboot
  exit 0
fi

if [ "$state" = rebooted ]; then
  read -r flight next < $OUT/flight
  t=$(now)
  say "back after the reboot; the units: $(systemctl is-active fossil-server@served ocx2-backoffice@served $SUP | tr '\n' ' ')"
  waitFor 120 endedIn "$flight"
  s=$(thread "$flight"); detail "$flight: $s"
  ok=0
  echo "$s" | grep -q 'started=1 ended=1 outcome=lost' || ok=1
  waitFor 120 endedIn "$next"
  n=$(thread "$next"); detail "$next: $n"
  echo "$n" | grep -q 'started=1 ended=1 outcome=exited limit= exit=0' || ok=1
  verdict "4 reboot with a run in flight" "$t" $ok "after boot the units brought the node up, the run in flight was answered lost once, the run posted while the node was down started and ended"
  # ---------------------------------------------------------------- proof 7, first half: a hard reset with a run in flight
  t=$(now)
  flight=$(post "in flight across a hard reset" 'sleep 600' '{"wall":"15m"}')
  waitFor 120 startedIn "$flight"
  detail "in flight: $flight: $(thread "$flight")"
  echo "$flight" > $OUT/flight
  echo reset > $OUT/state
  say "asking the host for a hard reset (QEMU's system_reset: no shutdown, no sync) with $flight in flight"
  # the host resets the machine as soon as it sees the request; nothing here runs after it
  echo "$flight" > $OUT/reset-request
  sleep 600
  say "FAIL 7 hard reset: the host did not reset the machine within 600 s"
  exit 1
fi

if [ "$state" = reset ]; then
  read -r flight < $OUT/flight
  t=$(now)
  say "back after the hard reset; the units: $(systemctl is-active fossil-server@served ocx2-backoffice@served $SUP | tr '\n' ' ')"
  waitFor 120 endedIn "$flight"
  s=$(thread "$flight"); detail "$flight: $s"
  ok=0
  echo "$s" | grep -q 'started=1 ended=1 outcome=lost' || ok=1
  after=$(post "posted after the hard reset" 'echo hello' '{"wall":"1m"}')
  waitFor 120 endedIn "$after"
  n=$(thread "$after"); detail "$after: $n"
  echo "$n" | grep -q 'started=1 ended=1 outcome=exited limit= exit=0' || ok=1
  # nothing answered twice, across the whole check
  sleep 5
  all=$(cat $OUT/runs)
  for r in $all; do s=$(thread "$r"); echo "$s" | grep -q 'started=[01] ended=1' || { ok=1; detail "answered wrongly: $r: $s"; }; done
  verdict "7 hard reset with a run in flight" "$t" $ok "after the reset the units brought the node up, the run in flight was answered lost once, a run posted after it started and ended; all $(echo $all | wc -w) runs of the check with at most one started and exactly one ended"
  echo done > $OUT/state
  say "done"
  systemctl poweroff
fi
