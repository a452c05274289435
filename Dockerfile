# nodens container image: compiled JavaScript on the Node.js 24 runtime, run as
# a non-root user, a drop-in for CoreDNS's image (coredns/deployment's
# `-conf /etc/coredns/Corefile`) and for k8s-dns-node-cache's (`node-cache ...`).
#
#   docker build -t localhost/nodens:0.1.0 .
#
# Both base images are build arguments so that a build without a registry can
# pass local ones (test/image/run.ts does).
#   NODE_IMAGE     a Node.js 24 image with npm and apt: compiles nodens and
#                  provides the node binary (and nothing else) to the runtime.
#   RUNTIME_IMAGE  Debian bookworm: glibc and libstdc++ for node, and apt for
#                  the tools `nodens node-cache` runs (ip, iptables, nft), which
#                  is why this is not a distroless image (see docs/deploy.md).
ARG NODE_IMAGE=node:24-bookworm-slim
ARG RUNTIME_IMAGE=debian:bookworm-slim

# The node binary with the file capability to bind ports below 1024, as CoreDNS
# sets it on /coredns: the server runs as uid 65532 and still binds :53. Its
# symbol table is stripped (18 MB; the dynamic symbols native addons link
# against stay). A stage of its own so that source changes do not redo it.
FROM ${NODE_IMAGE} AS node
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get -qq update \
    && apt-get -qq install --no-install-recommends libcap2-bin binutils >/dev/null \
    && strip -o /node "$(command -v node)" \
    && setcap cap_net_bind_service=+ep /node \
    && /node --version

# Compile src/ to dist/, then keep only the runtime dependencies.
FROM ${NODE_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
# A C compiler for the native addons (batched UDP, forwarding sockets); the image
# build fails rather than ship the slower pure-Node paths (NODENS_REQUIRE_NATIVE).
RUN apt-get -qq update && apt-get -qq install --no-install-recommends gcc libc6-dev >/dev/null
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the only install script is the `node` devDependency's
# download of a second Node.js, which the build does not need (the base has one);
# `prepare` (the build) runs below once the sources are here.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The build's scripts: the bundle bin/nodens runs (dist/bundle/), the optional native addons.
COPY scripts/bundle.ts scripts/build-native.mjs ./scripts/
COPY native ./native
# Type declarations and source maps are never loaded at run time (31 MB of
# @kubernetes/client-node alone); prune leaves empty scope folders behind.
RUN NODENS_REQUIRE_NATIVE=1 npm run build \
    && npm prune --omit=dev --ignore-scripts --no-audit --no-fund \
    && rm -f node_modules/.package-lock.json \
    && find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' \) -delete \
    && find node_modules -mindepth 1 -type d -empty -delete

FROM ${RUNTIME_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
# iproute2, iptables (legacy and nft variants) and nftables: `nodens node-cache`
# creates its interface with `ip` and installs its rules with the host's firewall
# tool, as k8s-dns-node-cache's image carries them. Plain nodens does not use them.
# ca-certificates: the system store that TLS clients (forward tls://, grpc, dnstap)
# verify upstreams against, as CoreDNS's image carries /etc/ssl/certs.
RUN apt-get -qq update \
    && apt-get -qq install --no-install-recommends iproute2 iptables nftables ca-certificates >/dev/null \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log
COPY --from=node /node /usr/local/bin/node
COPY --from=build /src/node_modules /nodens/node_modules
COPY --from=build /src/dist /nodens/dist
COPY --from=build /src/build/native /nodens/build/native
COPY package.json coredns.version /nodens/
COPY bin /nodens/bin
# `nodens` on PATH, for `nodens doctor` in an init container.
RUN ln -s /nodens/bin/nodens /usr/local/bin/nodens
# Numeric uid/gid 65532 (distroless's "nonroot"), as CoreDNS's image: Kubernetes
# can only check runAsNonRoot against a numeric user. node-cache, which changes
# the host's interfaces and firewall, runs as root through its DaemonSet's
# securityContext (runAsUser: 0), as k8s-dns-node-cache does.
USER 65532:65532
# CoreDNS's working directory: a relative -conf (default "Corefile") means /Corefile.
WORKDIR /
EXPOSE 53/udp 53/tcp 9153
# At most two malloc arenas, as bin/nodens sets (V8's background threads otherwise keep an arena each).
ENV MALLOC_ARENA_MAX=2
# node itself is PID 1 (no shell in between), so SIGTERM from `docker stop` or
# the kubelet reaches nodens's handler: "[INFO] SIGTERM: Shutting down servers
# then terminating". The flags are bin/nodens's (there is no shell launcher
# here): the smaller young generation, OpenSSL's certificate store (the system's,
# /etc/ssl/certs: node has a file capability, so OpenSSL ignores SSL_CERT_FILE and
# NODE_EXTRA_CA_CERTS here), and no Maglev tier; NODE_OPTIONS from the pod spec
# still applies.
ENTRYPOINT ["/usr/local/bin/node", "--max-semi-space-size=4", "--use-openssl-ca", "--no-maglev", "/nodens/dist/bundle/nodens.js"]
