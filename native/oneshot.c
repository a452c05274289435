// One-use UDP sockets towards upstreams (forward's default, RFC 5452 §9.2), in C.
//
// Per upstream query: socket, bind to a source port drawn from the CSPRNG in 1024-65535 (16 bits, where the
// kernel's own choice covers ip_local_port_range, 14.8 bits by default), connect to the upstream (the kernel then
// drops datagrams from any other address), send, and register with one epoll instance. That epoll fd is watched by
// a single uv_poll in Node's loop: when it is readable, one recv per ready socket puts the replies (or the socket's
// error, e.g. ECONNREFUSED after an ICMP port unreachable) into memory shared with JavaScript, and one call hands
// them all over. JavaScript checks ID and question (a reply is taken only when both match) and hands each socket
// back (close) when its query is done, answered or timed out; this file never closes or recycles a socket that
// JavaScript holds, so a descriptor number seen by JavaScript is never reused behind its back (idle recycled
// sockets are this file's alone).
//
// Exports (one instance per Node environment: main thread and each worker have their own epoll):
//   setup(deliver) -> [ArrayBuffer data, ArrayBuffer meta]   deliver(n) is called with n entries in meta,
//                     3 int32 each: fd, offset in data, length (or -errno)
//   sockaddr(ip, port) -> ArrayBuffer | null                 an IP literal packed as a sockaddr (null: not one)
//   send(dst, src | null, query, anyKernelPort?) -> number   fd * 65536 + local port (0: the kernel's pick, not
//                                                            looked up), or -(stage * 4096 + errno)
//                                                            (stage 1 socket, 2 bind, 3 connect, 4 send);
//                                                            anyKernelPort: the query carries enough entropy of
//                                                            its own (0x20) that the kernel's pick in its range
//                                                            will do: always a recycled socket, no draw
//   kernelPorts() -> number                                  ports in ip_local_port_range not to avoid (0: unknown)
//   resend(fd, query) -> number                              send again on an open socket (reuse_udp_sockets
//                                                            pools them): 0, or -(4 * 4096 + errno)
//   close(fd)                                                end of the query: recycle the socket (below) or
//                                                            close it (and so leave the epoll set)
//   trim()                                                   close the idle recycled sockets
//   local(fd) -> string                                      "ip:port" of our end ('' when unknown)
//   open() -> number                                         sockets carrying a query (tests: timeouts end them)
//   idle() -> number                                         recycled sockets kept idle (tests)
//   avoid(port)                                              never draw this port (the server's own UDP ports:
//                                                            a reload binding one must not find it held by a
//                                                            query's socket; unbound's outgoing-port-avoid)
//
// Recycled sockets (the cheap half of the port space). A port is drawn uniformly over 1024-65535 as before. When it
// falls outside the kernel's ip_local_port_range, a fresh socket is bound to it and closed after its query. When it
// falls inside, the socket is not bound at all: connect() makes the kernel pick a port uniformly at random (from
// get_random_u32) in that range, which, conditioned on the draw falling there, is the same distribution. Such a
// socket never had a port bound by hand, so after its query connect(AF_UNSPEC) unhashes it and gives the port back,
// and the next query's connect picks a fresh random port for it: the socket (and its epoll registration) is reused,
// its port never is. That saves socket, epoll_ctl, close and bind (about 9 of 14 us per query here) for the share of
// queries the kernel's range covers (44 % with the default 32768-60999; all of them when the range is 1024-65535),
// while the port stays uniform over 1024-65535 and independent from query to query.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <node_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

// Shared reply memory: a batch stops while less than one maximal datagram fits, the rest waits for the next turn
// (level-triggered epoll reports those sockets again).
#define DATA_BYTES (256 * 1024)
#define MAX_DGRAM 65535
#define MAX_EVENTS 128
#define PORT_TRIES 8
// Idle recycled sockets kept per address family: bounded so that an idle server holds few descriptors.
#define IDLE_MAX 64

// owned[fd]: 0 not ours, 1 carrying a query (JavaScript holds it), 2 idle in a recycle pool.
enum { FD_FREE = 0, FD_BUSY = 1, FD_IDLE = 2 };
// recyclable[fd]: the kernel picked its port (no bind by hand), so a disconnect frees the port; 1 + its family's
// pool index (no getsockname at release).

typedef struct {
  struct sockaddr_storage sa;
  socklen_t len;
} addr_t;

typedef struct {
  napi_env env;
  int epfd;
  uv_poll_t poll;
  int polling;
  napi_ref deliver;
  napi_ref data_ref;
  napi_ref meta_ref;
  napi_async_context actx;
  uint8_t *data;
  int32_t *meta;
  // Descriptors opened here and not yet closed (closed at environment teardown: a worker may end mid-query).
  uint8_t *owned;
  uint8_t *recyclable;
  int owned_cap;
  int open_count;
  // Idle recycled sockets, disconnected and drained: [0] AF_INET, [1] AF_INET6.
  int idle[2][IDLE_MAX];
  int idle_n[2];
  // The kernel's ip_local_port_range (read at load; lo > hi: unknown, never recycle).
  int eph_lo, eph_hi;
  uint16_t rnd[512];
  int rnd_at;
  uint8_t avoid[65536 / 8];
  // Ports to avoid in the kernel's range: its picks are then looked up (getsockname) and checked.
  int avoid_in_range;
  napi_async_cleanup_hook_handle cleanup;
} state_t;

static int throw_errno(napi_env env, const char *what) {
  char msg[128];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(errno));
  napi_throw_error(env, NULL, msg);
  return -1;
}

/** A source port uniformly in 1024-65535 from the CSPRNG (rejection sampling: no modulo bias). */
static int random_port(state_t *s) {
  for (;;) {
    if (s->rnd_at >= (int)(sizeof s->rnd / sizeof s->rnd[0])) {
      size_t got = 0;
      while (got < sizeof s->rnd) {
        ssize_t r = getrandom((uint8_t *)s->rnd + got, sizeof s->rnd - got, 0);
        if (r < 0) {
          if (errno == EINTR) continue;
          return 0; // no CSPRNG (cannot happen on Linux >= 3.17): let the kernel pick
        }
        got += (size_t)r;
      }
      s->rnd_at = 0;
    }
    unsigned r = s->rnd[s->rnd_at++];
    if (r >= 65536 - 1024) continue;
    r += 1024;
    if (s->avoid[r >> 3] & (1u << (r & 7))) continue;
    return (int)r;
  }
}

static void set_port(struct sockaddr_storage *sa, int port) {
  if (sa->ss_family == AF_INET6) ((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)port);
  else ((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)port);
}

static int own(state_t *s, int fd) {
  if (fd >= s->owned_cap) {
    int cap = s->owned_cap > 0 ? s->owned_cap : 1024;
    while (cap <= fd) cap *= 2;
    uint8_t *o = realloc(s->owned, (size_t)cap);
    if (o == NULL) return -1;
    memset(o + s->owned_cap, 0, (size_t)(cap - s->owned_cap));
    s->owned = o;
    uint8_t *r = realloc(s->recyclable, (size_t)cap);
    if (r == NULL) return -1;
    memset(r + s->owned_cap, 0, (size_t)(cap - s->owned_cap));
    s->recyclable = r;
    s->owned_cap = cap;
  }
  s->owned[fd] = FD_BUSY;
  s->open_count++;
  return 0;
}

static void disown_close(state_t *s, int fd) {
  if (fd < 0 || fd >= s->owned_cap || !s->owned[fd]) return; // not ours, or closed already: never close twice
  s->owned[fd] = FD_FREE;
  s->recyclable[fd] = 0;
  s->open_count--;
  close(fd);
}

/** Discards whatever a socket holds: queued datagrams and a pending error (an ICMP that came after its query). */
static void drain(int fd) {
  uint8_t b[16];
  for (int i = 0; i < 64; i++) {
    ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT | MSG_TRUNC);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  }
}

/** Closes the idle recycled sockets. */
static void trim(state_t *s) {
  for (int f = 0; f < 2; f++) {
    while (s->idle_n[f] > 0) disown_close(s, s->idle[f][--s->idle_n[f]]);
  }
}

/**
 * The end of a query on `fd`: a socket whose port the kernel picked is disconnected (the port goes back to the
 * kernel), drained and kept idle for another query; any other is closed.
 */
static void release(state_t *s, int fd) {
  if (fd < 0 || fd >= s->owned_cap || s->owned[fd] != FD_BUSY) return;
  if (s->recyclable[fd]) {
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};
    int f = s->recyclable[fd] - 1;
    if (s->idle_n[f] < IDLE_MAX && connect(fd, &unspec, sizeof unspec) == 0) {
      drain(fd);
      s->owned[fd] = FD_IDLE;
      s->idle[f][s->idle_n[f]++] = fd;
      return;
    }
  }
  disown_close(s, fd);
}

/** The kernel's ephemeral port range, where connect() picks a port for an unbound socket. */
static void read_port_range(state_t *s) {
  s->eph_lo = 1;
  s->eph_hi = 0;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
  if (f == NULL) return;
  int lo, hi;
  if (fscanf(f, "%d %d", &lo, &hi) == 2 && lo >= 1024 && hi <= 65535 && lo <= hi) {
    s->eph_lo = lo;
    s->eph_hi = hi;
  }
  fclose(f);
}

static int local_port(int fd) {
  struct sockaddr_storage got;
  socklen_t glen = sizeof got;
  if (getsockname(fd, (struct sockaddr *)&got, &glen) != 0) return 0;
  return ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                         : ((struct sockaddr_in *)&got)->sin_port);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  (void)events;
  state_t *s = h->data;
  if (status < 0 || s->deliver == NULL) return;
  struct epoll_event ev[MAX_EVENTS];
  int n = epoll_wait(s->epfd, ev, MAX_EVENTS, 0);
  if (n <= 0) return;
  int count = 0;
  size_t off = 0;
  for (int i = 0; i < n && off + MAX_DGRAM <= DATA_BYTES; i++) {
    int fd = ev[i].data.fd;
    if (fd < s->owned_cap && s->owned[fd] == FD_IDLE) {
      drain(fd); // idle: nothing should reach it (it has no port), but never leave it readable
      continue;
    }
    ssize_t r = recv(fd, s->data + off, MAX_DGRAM, MSG_DONTWAIT);
    int32_t *m = s->meta + 3 * count;
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      m[0] = fd;
      m[1] = 0;
      m[2] = -errno;
    } else {
      m[0] = fd;
      m[1] = (int32_t)off;
      m[2] = (int32_t)r;
      off += ((size_t)r + 7) & ~(size_t)7;
    }
    count++;
  }
  if (count == 0) return;
  napi_env env = s->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value fn, recv, argv[1], result;
  if (napi_get_reference_value(env, s->deliver, &fn) == napi_ok && napi_get_global(env, &recv) == napi_ok &&
      napi_create_int32(env, count, &argv[0]) == napi_ok) {
    // make_callback, not call_function: promise reactions and nextTicks run when it returns, as after any I/O.
    if (napi_make_callback(env, s->actx, recv, fn, 1, argv, &result) == napi_pending_exception) {
      napi_value err;
      if (napi_get_and_clear_last_exception(env, &err) == napi_ok) napi_fatal_exception(env, err);
    }
  }
  napi_close_handle_scope(env, scope);
}

static state_t *state_of(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv) {
  void *data = NULL;
  if (napi_get_cb_info(env, info, argc, argv, NULL, &data) != napi_ok) return NULL;
  return data;
}

static napi_value js_setup(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  state_t *s = state_of(env, info, &argc, argv);
  if (s == NULL) return NULL;
  napi_valuetype t;
  if (argc < 1 || napi_typeof(env, argv[0], &t) != napi_ok || t != napi_function) {
    napi_throw_type_error(env, NULL, "setup(deliver): a function");
    return NULL;
  }
  if (s->deliver != NULL) {
    napi_throw_error(env, NULL, "setup: called twice");
    return NULL;
  }
  napi_value data, meta, name, out;
  void *p;
  if (napi_create_arraybuffer(env, DATA_BYTES, &p, &data) != napi_ok) return NULL;
  s->data = p;
  if (napi_create_arraybuffer(env, 3 * MAX_EVENTS * sizeof(int32_t), &p, &meta) != napi_ok) return NULL;
  s->meta = p;
  if (napi_create_reference(env, data, 1, &s->data_ref) != napi_ok ||
      napi_create_reference(env, meta, 1, &s->meta_ref) != napi_ok ||
      napi_create_reference(env, argv[0], 1, &s->deliver) != napi_ok ||
      napi_create_string_utf8(env, "nodens:udp-oneshot", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_async_init(env, NULL, name, &s->actx) != napi_ok)
    return NULL;
  uv_loop_t *loop;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok) return NULL;
  if (uv_poll_init(loop, &s->poll, s->epfd) != 0) {
    napi_throw_error(env, NULL, "setup: uv_poll_init failed");
    return NULL;
  }
  s->poll.data = s;
  s->polling = 1;
  uv_poll_start(&s->poll, UV_READABLE, on_poll);
  // Like dgram sockets that are unref'd: the queries' timers keep the loop alive, not the poll.
  uv_unref((uv_handle_t *)&s->poll);
  if (napi_create_array_with_length(env, 2, &out) != napi_ok || napi_set_element(env, out, 0, data) != napi_ok ||
      napi_set_element(env, out, 1, meta) != napi_ok)
    return NULL;
  return out;
}

static napi_value js_sockaddr(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  state_t *s = state_of(env, info, &argc, argv);
  if (s == NULL) return NULL;
  char ip[INET6_ADDRSTRLEN + 1];
  size_t len;
  int32_t port = 0;
  if (argc < 2 || napi_get_value_string_utf8(env, argv[0], ip, sizeof ip, &len) != napi_ok ||
      napi_get_value_int32(env, argv[1], &port) != napi_ok) {
    napi_throw_type_error(env, NULL, "sockaddr(ip, port)");
    return NULL;
  }
  addr_t a;
  memset(&a, 0, sizeof a);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&a.sa;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a.sa;
  if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    a.len = sizeof *v4;
  } else if (inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    a.len = sizeof *v6;
  } else {
    napi_value nul;
    napi_get_null(env, &nul);
    return nul;
  }
  napi_value out;
  void *p;
  if (napi_create_arraybuffer(env, sizeof a, &p, &out) != napi_ok) return NULL;
  memcpy(p, &a, sizeof a);
  return out;
}

static const addr_t *addr_arg(napi_env env, napi_value v) {
  void *p = NULL;
  size_t len = 0;
  if (napi_get_arraybuffer_info(env, v, &p, &len) != napi_ok || len != sizeof(addr_t)) return NULL;
  return p;
}

static napi_value js_send(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  state_t *s = state_of(env, info, &argc, argv);
  if (s == NULL) return NULL;
  napi_valuetype st = napi_undefined;
  const addr_t *dst = argc >= 3 ? addr_arg(env, argv[0]) : NULL;
  bool any_kernel_port = false;
  if (argc >= 4 && napi_get_value_bool(env, argv[3], &any_kernel_port) != napi_ok) any_kernel_port = false;
  const addr_t *src = NULL;
  if (dst != NULL && napi_typeof(env, argv[1], &st) == napi_ok && st != napi_null && st != napi_undefined)
    src = addr_arg(env, argv[1]);
  void *q = NULL;
  size_t qlen = 0;
  napi_typedarray_type tt;
  napi_value ab;
  size_t boff = 0;
  if (dst == NULL || (st != napi_null && st != napi_undefined && src == NULL) ||
      napi_get_typedarray_info(env, argv[2], &tt, &qlen, &q, &ab, &boff) != napi_ok || tt != napi_uint8_array) {
    napi_throw_type_error(env, NULL, "send(dst, src | null, query: Uint8Array)");
    return NULL;
  }
  int stage = 1, port = 0;
  int f = dst->sa.ss_family == AF_INET6 ? 1 : 0;
  // A draw in the kernel's range (or any query whose own entropy lets the kernel's range do): an unbound socket (an
  // idle recycled one when there is one) and the kernel's own uniform pick in that range at connect. With a source
  // address every socket is bound by hand, as before.
  // Not when a 64th of the range or more is to be avoided: PORT_TRIES picks could then all land on such ports.
  int any = any_kernel_port && s->eph_lo <= s->eph_hi && 64 * s->avoid_in_range < s->eph_hi - s->eph_lo + 1;
  int drawn = any ? 0 : random_port(s);
  int kernel = src == NULL && (any || (drawn >= s->eph_lo && drawn <= s->eph_hi));
  if (!kernel && drawn == 0) drawn = random_port(s);
  int recycled = 0, fd = -1;
  if (kernel && s->idle_n[f] > 0) {
    fd = s->idle[f][--s->idle_n[f]];
    recycled = 1;
  } else {
    fd = socket(dst->sa.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && s->idle_n[0] + s->idle_n[1] > 0) {
      trim(s); // out of descriptors: the idle ones go first
      fd = socket(dst->sa.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    }
  }
  if (fd >= 0) {
    stage = 2;
    int rc = 0;
    if (!kernel) {
      struct sockaddr_storage local;
      socklen_t llen;
      if (src != NULL) {
        local = src->sa;
        llen = src->len;
      } else {
        memset(&local, 0, sizeof local);
        local.ss_family = dst->sa.ss_family;
        llen = dst->len; // the wildcard address of the upstream's family
      }
      rc = -1;
      for (int i = 0; i < PORT_TRIES && rc != 0; i++) {
        port = i == 0 ? drawn : random_port(s);
        set_port(&local, port);
        rc = bind(fd, (struct sockaddr *)&local, llen);
        if (rc != 0 && errno != EADDRINUSE && errno != EACCES) break;
      }
      if (rc != 0 && (errno == EADDRINUSE || errno == EACCES)) {
        // Every draw was taken (a server holding most ports?): the kernel's choice beats failing the query.
        set_port(&local, 0);
        rc = bind(fd, (struct sockaddr *)&local, llen);
        if (rc == 0) port = local_port(fd);
      }
    }
    if (rc == 0) {
      stage = 3;
      rc = connect(fd, (const struct sockaddr *)&dst->sa, dst->len);
      // The kernel's pick may be a port to avoid (it does not know the list): give it back and connect again. When
      // none lies in its range, the port is not looked up here (0 is returned; local() tells it when needed).
      for (int i = 0; rc == 0 && kernel && s->avoid_in_range; i++) {
        port = local_port(fd);
        if (port == 0 || !(s->avoid[port >> 3] & (1u << (port & 7))) || i >= PORT_TRIES) break;
        struct sockaddr unspec = {.sa_family = AF_UNSPEC};
        if (connect(fd, &unspec, sizeof unspec) == 0) rc = connect(fd, (const struct sockaddr *)&dst->sa, dst->len);
      }
      if (rc == 0) {
        stage = 4;
        if (send(fd, q, qlen, MSG_DONTWAIT) == (ssize_t)qlen) {
          stage = 5;
          if (recycled) {
            s->owned[fd] = FD_BUSY; // still in the epoll set
            stage = 0;
          } else {
            struct epoll_event ev = {.events = EPOLLIN, .data = {.fd = fd}};
            if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 && own(s, fd) == 0) {
              s->recyclable[fd] = kernel ? (uint8_t)(f + 1) : 0;
              stage = 0;
            }
          }
        }
      }
    }
  }
  napi_value out;
  if (stage != 0) {
    int e = errno;
    if (recycled) disown_close(s, fd);
    else if (fd >= 0) close(fd);
    if (stage == 5) stage = 4;
    napi_create_double(env, -(double)(stage * 4096 + e), &out);
    return out;
  }
  napi_create_double(env, (double)fd * 65536 + port, &out);
  return out;
}

static napi_value js_kernel_ports(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  state_t *s = state_of(env, info, &argc, NULL);
  if (s == NULL) return NULL;
  napi_value out;
  napi_create_int32(env, s->eph_lo <= s->eph_hi ? s->eph_hi - s->eph_lo + 1 - s->avoid_in_range : 0, &out);
  return out;
}

static napi_value js_resend(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  state_t *s = state_of(env, info, &argc, argv);
  if (s == NULL) return NULL;
  int32_t fd = -1;
  void *q = NULL;
  size_t qlen = 0, boff = 0;
  napi_typedarray_type tt;
  napi_value ab;
  if (argc < 2 || napi_get_value_int32(env, argv[0], &fd) != napi_ok ||
      napi_get_typedarray_info(env, argv[1], &tt, &qlen, &q, &ab, &boff) != napi_ok || tt != napi_uint8_array) {
    napi_throw_type_error(env, NULL, "resend(fd, query: Uint8Array)");
    return NULL;
  }
  int rc = 0;
  if (fd < 0 || fd >= s->owned_cap || s->owned[fd] != FD_BUSY) rc = -(4 * 4096 + EBADF); // not ours: never write
  else if (send(fd, q, qlen, MSG_DONTWAIT) != (ssize_t)qlen) rc = -(4 * 4096 + errno);
  napi_value out;
  napi_create_int32(env, rc, &out);
  return out;
}

static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  state_t *s = state_of(env, info, &argc, argv);
  if (s == NULL) return NULL;
  int32_t fd = -1;
  if (argc >= 1 && napi_get_value_int32(env, argv[0], &fd) == napi_ok) release(s, fd);
  return NULL;
}

static napi_value js_trim(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  state_t *s = state_of(env, info, &argc, NULL);
  if (s != NULL) trim(s);
  return NULL;
}

static napi_value js_local(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  state_t *s = state_of(env, info, &argc, argv);
  if (s == NULL) return NULL;
  int32_t fd = -1;
  char text[INET6_ADDRSTRLEN + 16] = "";
  if (argc >= 1 && napi_get_value_int32(env, argv[0], &fd) == napi_ok && fd >= 0 && fd < s->owned_cap &&
      s->owned[fd]) {
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    char ip[INET6_ADDRSTRLEN];
    if (getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
      if (a.ss_family == AF_INET6) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a;
        if (inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof ip) != NULL)
          snprintf(text, sizeof text, "[%s]:%u", ip, ntohs(v6->sin6_port));
      } else {
        struct sockaddr_in *v4 = (struct sockaddr_in *)&a;
        if (inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof ip) != NULL)
          snprintf(text, sizeof text, "%s:%u", ip, ntohs(v4->sin_port));
      }
    }
  }
  napi_value out;
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &out);
  return out;
}

static napi_value js_avoid(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  state_t *s = state_of(env, info, &argc, argv);
  if (s == NULL) return NULL;
  int32_t port = -1;
  if (argc >= 1 && napi_get_value_int32(env, argv[0], &port) == napi_ok && port > 0 && port < 65536) {
    unsigned bit = 1u << (port & 7);
    if (!(s->avoid[port >> 3] & bit) && port >= s->eph_lo && port <= s->eph_hi) s->avoid_in_range++;
    s->avoid[port >> 3] |= (uint8_t)bit;
  }
  return NULL;
}

static napi_value js_open(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  state_t *s = state_of(env, info, &argc, NULL);
  if (s == NULL) return NULL;
  napi_value out;
  napi_create_int32(env, s->open_count - s->idle_n[0] - s->idle_n[1], &out);
  return out;
}

static napi_value js_idle(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  state_t *s = state_of(env, info, &argc, NULL);
  if (s == NULL) return NULL;
  napi_value out;
  napi_create_int32(env, s->idle_n[0] + s->idle_n[1], &out);
  return out;
}

static void free_state(uv_handle_t *h) {
  state_t *s = h->data;
  napi_async_cleanup_hook_handle hook = s->cleanup;
  free(s->owned);
  free(s->recyclable);
  free(s);
  napi_remove_async_cleanup_hook(hook);
}

// Environment teardown (process exit, or a worker ending): close every socket still open, the epoll, the poll.
static void on_teardown(napi_async_cleanup_hook_handle handle, void *arg) {
  state_t *s = arg;
  s->cleanup = handle;
  for (int fd = 0; fd < s->owned_cap; fd++)
    if (s->owned[fd]) disown_close(s, fd);
  s->idle_n[0] = s->idle_n[1] = 0;
  if (s->deliver != NULL) {
    napi_delete_reference(s->env, s->deliver);
    napi_delete_reference(s->env, s->data_ref);
    napi_delete_reference(s->env, s->meta_ref);
    napi_async_destroy(s->env, s->actx);
    s->deliver = NULL;
  }
  close(s->epfd);
  if (s->polling) {
    uv_poll_stop(&s->poll);
    uv_close((uv_handle_t *)&s->poll, free_state);
  } else {
    s->poll.data = s;
    free_state((uv_handle_t *)&s->poll);
  }
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  state_t *s = calloc(1, sizeof *s);
  if (s == NULL) {
    napi_throw_error(env, NULL, "oneshot: out of memory");
    return NULL;
  }
  s->env = env;
  s->rnd_at = sizeof s->rnd / sizeof s->rnd[0];
  read_port_range(s);
  s->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (s->epfd < 0) {
    free(s);
    throw_errno(env, "oneshot: epoll_create1");
    return NULL;
  }
  if (napi_add_async_cleanup_hook(env, on_teardown, s, NULL) != napi_ok) {
    close(s->epfd);
    free(s);
    return NULL;
  }
  static const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {{"setup", js_setup}, {"sockaddr", js_sockaddr}, {"send", js_send},
             {"close", js_close}, {"local", js_local},       {"open", js_open},
             {"avoid", js_avoid}, {"resend", js_resend},
             {"trim", js_trim},   {"idle", js_idle},         {"kernelPorts", js_kernel_ports}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, s, &f) != napi_ok ||
        napi_set_named_property(env, exports, fns[i].name, f) != napi_ok)
      return NULL;
  }
  return exports;
}
