# Sourced by the scripts that run a `scripts/scaling-bundle` bundle on another
# machine (scaling-run, load-client-run, serve-syscalls-run): the bundle's
# programs under its own loader, a work directory with the 1 KiB file they
# serve, nginx's configuration, and the wait for a port.
#
#   bundle_setup BUNDLE NAME   sets $bundle, $work (removed at exit, with every
#                              process group in $pids), the array $loader (run
#                              "${loader[@]}" "$bundle/bin/PROGRAM" ARGS: the
#                              bundle's loader and libraries, so taskset and
#                              setsid can start it) and raises the descriptor
#                              limit to the hard one
#   nginx_conf WORKERS PORT    writes $work/nginx/nginx.conf (epoll, reuseport,
#                              keep-alive without limit, root $work/root)
#   wait_port PORT             true once something accepts on 127.0.0.1:PORT (10 s)
#   machine_line               "machine: N CPUs, MODEL, kernel K"

bundle_setup() {
  bundle=$(cd "$1" && pwd)
  loader=("$bundle/lib/ld-linux-x86-64.so.2" --library-path "$bundle/lib")
  work=$(mktemp -d "/tmp/$2.XXXXXX")
  chmod 755 "$work"
  mkdir -p "$work/root" "$work/nginx"
  head -c 1024 /dev/zero | tr '\0' 'x' > "$work/root/1k.bin"
  chmod -R a+rX "$work"
  ulimit -n "$(ulimit -Hn)"
  pids=()
  trap 'for p in "${pids[@]}"; do kill -9 -- "-$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
}

nginx_conf() {
  cat > "$work/nginx/nginx.conf" <<NGX
daemon off; master_process on; user root; worker_processes $1; worker_rlimit_nofile 65536;
pid $work/nginx/nginx.pid; error_log $work/nginx/error.log warn;
events { worker_connections 16384; use epoll; }
http { access_log off; sendfile on; tcp_nopush on; tcp_nodelay on; keepalive_timeout 600s;
  keepalive_requests 1000000000; open_file_cache max=1024 inactive=60s; open_file_cache_valid 1s;
  client_body_temp_path $work/nginx/b; proxy_temp_path $work/nginx/p; fastcgi_temp_path $work/nginx/f;
  uwsgi_temp_path $work/nginx/u; scgi_temp_path $work/nginx/s; default_type application/octet-stream;
  server { listen 127.0.0.1:$2 backlog=4096 reuseport; root $work/root; } }
NGX
}

wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

machine_line() {
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
}
