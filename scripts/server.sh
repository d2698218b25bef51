# Sourced by the scripts that start a server in the background
# (async-bench.sh, client-overhead.sh): stop_server stops the one whose
# PID is in $server, and its children (SkyRL tx's engine). SkyRL's API
# server (uvicorn) may outlive a TERM while its engine runs a call: it
# gets 10 s, then KILL.
server=
stop_server() {
  [ -n "$server" ] || return 0
  pkill -P "$server" 2>/dev/null || true
  kill "$server" 2>/dev/null || true
  for _ in $(seq 10); do kill -0 "$server" 2>/dev/null || return 0; sleep 1; done
  pkill -9 -P "$server" 2>/dev/null || true
  kill -9 "$server" 2>/dev/null || true
}
