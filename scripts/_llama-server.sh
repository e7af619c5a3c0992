# Sourced by the benchmark scripts that run cells against a llama-server: start one, wait for it, stop it.
#   start_llama_server LOG PORT COMMAND...   runs COMMAND (with its environment assignments done by the caller)
#                                            in the background, its output in LOG, until /health answers on PORT;
#                                            returns 1, naming LOG, when it exits first
#   stop_llama_server                        stops the one started (also on exit)
server_pid=""

stop_llama_server() {
    if [[ -n "$server_pid" ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
trap stop_llama_server EXIT

start_llama_server() {
    local log="$1" port="$2"
    shift 2
    "$@" >"$log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 300); do
        if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then return 0; fi
        if ! kill -0 "$server_pid" 2>/dev/null; then
            echo "llama-server exited at start: see $log" >&2
            server_pid=""
            return 1
        fi
        sleep 1
    done
    echo "llama-server did not answer on port $port within 300 s: see $log" >&2
    return 1
}
