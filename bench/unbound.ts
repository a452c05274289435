// unbound's configuration as nodens's benchmarks and drills run it: one local instance on loopback,
// no daemon, no chroot, no rate limits, answering from the local zones in `body`.

export function unboundConf(dir: string, port: number, body: string, threads = 1): string {
  return `server:
    interface: 127.0.0.1
    port: ${port}
    do-ip6: no
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "${dir}"
    pidfile: "${dir}/unbound.pid"
    use-syslog: no
    logfile: ""
    verbosity: 0
    num-threads: ${threads}
    so-reuseport: ${threads > 1 ? 'yes' : 'no'}
    access-control: 127.0.0.0/8 allow
    module-config: "iterator"
    prefetch: no
    ip-ratelimit: 0
    ratelimit: 0
${body}
remote-control:
    control-enable: no
`;
}
