// A UDP server socket for nodens's DNS listener: datagrams are read with recvmmsg, a batch at a time, into memory
// JavaScript reads directly, and the whole batch is handed to ONE JavaScript call; the replies it queues are sent
// with one sendmmsg when it returns. Node's dgram costs a system call and a JavaScript callback (with a Buffer and an
// rinfo object) per datagram each way, most of a busy core on a DNS server's hot path.
//
// On a wildcard bind, each datagram's destination address is received (IP_PKTINFO / IPV6_RECVPKTINFO) and the reply
// is sent from it (a pktinfo control message), as CoreDNS does: a client that queried 127.0.0.2 gets its answer
// from 127.0.0.2, not from whichever address the routing table prefers.
//
// Memory shared with JavaScript (all made once per socket, except the receive pool):
// - recv meta: RECV_SLOT_INTS int32 per datagram of the batch (see the R_* offsets);
// - receive pool: a Buffer the datagrams are copied into, one after the other, never overwritten: a new pool
//   replaces a full one, so a query JavaScript keeps (an async chain, a background refresh) stays valid;
// - send meta and send buffer: JavaScript writes each reply's bytes and destination there, then says how many.
// Readiness comes from a uv_poll on the socket in Node's own event loop.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>
#include <node_api.h>
#include <uv.h>

#define BATCH 32
// Every slot takes the largest datagram, so nothing is cut (as with dgram); pages a datagram does not touch are
// never made resident.
#define SLOT 65536
// Small, so that a pool is normally garbage before the next scavenge: a pool that stays current across two young
// collections (a 256 KiB one took ~0.3 s to fill at 23k q/s) is promoted, and then waits (with every promoted pool before
// it) for a full collection that a server answering from memory rarely triggers. At 256 KiB that was ~0.7 MB/s of
// dead pools, +15 MiB of peak RSS in 20 s of the hosts benchmark.
#define POOL_SIZE (16 * 1024)
#define SEND_SLOTS 256
#define SEND_SIZE (256 * 1024)
// Replies kept while the socket buffer is full (EAGAIN), beyond which they are dropped as the kernel would.
#define PENDING_MAX 4096
#define ROUNDS 8

// Per-datagram int32 fields, received and sent alike; bytes 32..47 the peer address, 48..63 the local one
// (IPv4 in the last four bytes of a v4-mapped IPv6 address on a dual-stack socket; on an IPv4 socket, bytes 0..3).
#define SLOT_INTS 16
#define F_OFF 0
#define F_LEN 1
#define F_PORT 2
#define F_SCOPE 3
#define F_STATUS 4
#define F_HASDST 5

static void on_poll(uv_poll_t *h, int status, int events);

typedef struct pending {
  struct pending *next;
  struct sockaddr_storage to;
  socklen_t tolen;
  int hasdst;
  uint8_t dst[16];
  size_t len;
  uint8_t data[];
} pending_t;

typedef struct {
  napi_env env;
  uv_poll_t poll;
  int fd;
  int v6;
  int pktinfo;
  int events;
  int closing;     // close() was called: no more reads, sends still allowed until the handle closes
  int closed;      // the uv handle is closed and the fd too
  int finalized;   // JavaScript dropped the handle
  int in_batch;
  napi_ref cb;
  napi_ref close_cb;
  napi_ref meta_ref;
  napi_ref send_meta_ref;
  napi_ref send_buf_ref;
  napi_ref pool_ref;
  napi_async_context actx;
  int32_t *meta;
  int32_t *send_meta;
  uint8_t *send_buf;
  uint8_t *pool;
  size_t pool_off;
  uint8_t *scratch;
  struct mmsghdr rmsg[BATCH];
  struct iovec riov[BATCH];
  struct sockaddr_in6 raddr[BATCH];
  char rctl[BATCH][128];
  struct mmsghdr smsg[SEND_SLOTS];
  struct iovec siov[SEND_SLOTS];
  struct sockaddr_in6 saddr[SEND_SLOTS];
  char sctl[SEND_SLOTS][64];
  pending_t *phead, *ptail;
  size_t npending;
} udp_t;

#define CHECK(call) do { if ((call) != napi_ok) return NULL; } while (0)

static napi_value throw_errno(napi_env env, const char *syscall, int err) {
  napi_value msg, code, e, sc, no;
  char text[128];
  // The codes the listener and its callers decide on, and the usual others (the message has strerror's text).
  const char *name = err == EADDRINUSE ? "EADDRINUSE" : err == EADDRNOTAVAIL ? "EADDRNOTAVAIL"
    : err == EAFNOSUPPORT ? "EAFNOSUPPORT" : err == EACCES ? "EACCES" : err == EINVAL ? "EINVAL"
    : err == EPERM ? "EPERM" : err == EMFILE ? "EMFILE" : err == ENFILE ? "ENFILE" : err == ENOMEM ? "ENOMEM"
    : err == ENOBUFS ? "ENOBUFS" : err == ENODEV ? "ENODEV" : "EIO";
  snprintf(text, sizeof text, "%s %s (%s)", syscall, name, strerror(err));
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &msg);
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_create_error(env, code, msg, &e);
  napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &sc);
  napi_set_named_property(env, e, "syscall", sc);
  napi_create_int32(env, -err, &no);
  napi_set_named_property(env, e, "errno", no);
  napi_throw(env, e);
  return NULL;
}

static void free_pending(udp_t *u) {
  pending_t *p = u->phead;
  while (p != NULL) { pending_t *n = p->next; free(p); p = n; }
  u->phead = u->ptail = NULL;
  u->npending = 0;
}

static void set_events(udp_t *u) {
  if (u->closed || uv_is_closing((uv_handle_t *)&u->poll)) return;
  int ev = (u->closing ? 0 : UV_READABLE) | (u->phead != NULL ? UV_WRITABLE : 0);
  if (ev == u->events) return;
  u->events = ev;
  if (ev == 0) uv_poll_stop(&u->poll);
  else uv_poll_start(&u->poll, ev, on_poll);
}

// The control message that makes a reply leave from `dst` (the query's destination); ifindex 0 leaves the route
// to the kernel, as CoreDNS (miekg's correctSource) does.
static socklen_t put_src(udp_t *u, char *ctl, const uint8_t *dst) {
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_control = ctl;
  // An IPv4 client of a dual-stack socket: its v4-mapped local address goes in an IPv4 pktinfo (the kernel
  // routes the datagram as IPv4 and rejects an IPv6 pktinfo there).
  static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
  int v4 = !u->v6 || memcmp(dst, mapped, 12) == 0;
  if (!v4) {
    m.msg_controllen = CMSG_SPACE(sizeof(struct in6_pktinfo));
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = IPPROTO_IPV6;
    c->cmsg_type = IPV6_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
    struct in6_pktinfo pi;
    memset(&pi, 0, sizeof pi);
    memcpy(&pi.ipi6_addr, dst, 16);
    memcpy(CMSG_DATA(c), &pi, sizeof pi);
  } else {
    m.msg_controllen = CMSG_SPACE(sizeof(struct in_pktinfo));
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
    struct in_pktinfo pi;
    memset(&pi, 0, sizeof pi);
    memcpy(&pi.ipi_spec_dst, u->v6 ? dst + 12 : dst, 4);
    memcpy(CMSG_DATA(c), &pi, sizeof pi);
  }
  return (socklen_t)m.msg_controllen;
}

static socklen_t put_addr(udp_t *u, struct sockaddr_in6 *sa, const int32_t *f) {
  const uint8_t *b = (const uint8_t *)(f + 8);
  memset(sa, 0, sizeof *sa);
  if (u->v6) {
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons((uint16_t)f[F_PORT]);
    sa->sin6_scope_id = (uint32_t)f[F_SCOPE];
    memcpy(&sa->sin6_addr, b, 16);
    return sizeof(struct sockaddr_in6);
  }
  struct sockaddr_in *s4 = (struct sockaddr_in *)sa;
  s4->sin_family = AF_INET;
  s4->sin_port = htons((uint16_t)f[F_PORT]);
  memcpy(&s4->sin_addr, b, 4);
  return sizeof(struct sockaddr_in);
}

static int keep_pending(udp_t *u, const struct msghdr *h, const uint8_t *dst) {
  if (u->npending >= PENDING_MAX) return ENOBUFS;
  size_t len = h->msg_iov[0].iov_len;
  pending_t *p = malloc(sizeof *p + len);
  if (p == NULL) return ENOMEM;
  p->next = NULL;
  memcpy(&p->to, h->msg_name, h->msg_namelen);
  p->tolen = h->msg_namelen;
  p->hasdst = h->msg_controllen != 0;
  if (p->hasdst) memcpy(p->dst, dst, 16);
  p->len = len;
  memcpy(p->data, h->msg_iov[0].iov_base, len);
  if (u->ptail != NULL) u->ptail->next = p; else u->phead = p;
  u->ptail = p;
  u->npending++;
  return 0;
}

// Sends what waits after an EAGAIN, oldest first, until the socket is full again.
static void send_pending(udp_t *u) {
  while (u->phead != NULL && !u->closed) {
    pending_t *p = u->phead;
    struct iovec iov = { p->data, p->len };
    char ctl[64];
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_name = &p->to;
    m.msg_namelen = p->tolen;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    if (p->hasdst) { m.msg_control = ctl; m.msg_controllen = put_src(u, ctl, p->dst); }
    ssize_t r = sendmsg(u->fd, &m, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // Sent, or failed for good (an ICMP error reported late, a route gone): either way it is done.
    u->phead = p->next;
    if (u->phead == NULL) u->ptail = NULL;
    u->npending--;
    free(p);
  }
  set_events(u);
}

// Sends the `n` replies JavaScript wrote into the send area; each entry's F_STATUS says 0 (sent or kept for
// POLLOUT) or the errno it failed with. Returns the number that failed.
static int flush(udp_t *u, int n) {
  if (n <= 0) return 0;
  if (n > SEND_SLOTS) n = SEND_SLOTS;
  int failed = 0;
  for (int i = 0; i < n; i++) {
    int32_t *f = u->send_meta + i * SLOT_INTS;
    struct msghdr *h = &u->smsg[i].msg_hdr;
    memset(h, 0, sizeof *h);
    f[F_STATUS] = 0;
    uint32_t off = (uint32_t)f[F_OFF], len = (uint32_t)f[F_LEN];
    if (off > SEND_SIZE || len > SEND_SIZE - off) { f[F_STATUS] = EINVAL; len = 0; off = 0; }
    u->siov[i].iov_base = u->send_buf + off;
    u->siov[i].iov_len = len;
    h->msg_iov = &u->siov[i];
    h->msg_iovlen = 1;
    h->msg_name = &u->saddr[i];
    h->msg_namelen = put_addr(u, &u->saddr[i], f);
    if (f[F_HASDST] && u->pktinfo) {
      h->msg_control = u->sctl[i];
      h->msg_controllen = put_src(u, u->sctl[i], (const uint8_t *)(f + 12));
    }
  }
  if (u->closed) {
    for (int i = 0; i < n; i++) u->send_meta[i * SLOT_INTS + F_STATUS] = EBADF;
    return n;
  }
  int i = 0;
  // Order matters little for UDP, but replies queued behind an EAGAIN stay behind it.
  if (u->phead != NULL) send_pending(u);
  while (i < n) {
    if (u->phead != NULL) {
      for (; i < n; i++) {
        int32_t *f = u->send_meta + i * SLOT_INTS;
        if (f[F_STATUS] != 0) { failed++; continue; }
        int e = keep_pending(u, &u->smsg[i].msg_hdr, (const uint8_t *)(u->send_meta + i * SLOT_INTS + 12));
        if (e != 0) { f[F_STATUS] = e; failed++; }
      }
      break;
    }
    if (u->send_meta[i * SLOT_INTS + F_STATUS] != 0) { failed++; i++; continue; }
    // One call for the run of valid entries starting at i.
    int j = i;
    while (j < n && u->send_meta[j * SLOT_INTS + F_STATUS] == 0) j++;
    int r = sendmmsg(u->fd, &u->smsg[i], (unsigned)(j - i), 0);
    if (r < 0) {
      int e = errno;
      if (e == EINTR) continue;
      if (e == EAGAIN || e == EWOULDBLOCK) {
        int k = keep_pending(u, &u->smsg[i].msg_hdr, (const uint8_t *)(u->send_meta + i * SLOT_INTS + 12));
        if (k != 0) { u->send_meta[i * SLOT_INTS + F_STATUS] = k; failed++; }
        i++;
        set_events(u);
        continue;
      }
      // This entry failed (ECONNREFUSED from an earlier ICMP error, EINVAL, EPERM...): skip it, send the rest.
      u->send_meta[i * SLOT_INTS + F_STATUS] = e;
      failed++;
      i++;
      continue;
    }
    i += r;
  }
  return failed;
}

// Sends what JavaScript queued: the header after the last send slot holds the count and the bytes used, both
// reset once sent. JavaScript reads each entry's status afterwards only when it needs to (send callbacks).
static int flush_queued(udp_t *u) {
  int32_t *hdr = u->send_meta + SEND_SLOTS * SLOT_INTS;
  int n = hdr[0];
  int failed = flush(u, n);
  hdr[0] = 0;
  hdr[1] = 0;
  return failed;
}

static napi_value cb_value(napi_env env, napi_ref r) {
  napi_value v;
  if (napi_get_reference_value(env, r, &v) != napi_ok) return NULL;
  return v;
}

// A new receive pool when the current one cannot take `need` more bytes.
static int ensure_pool(udp_t *u, size_t need) {
  if (u->pool != NULL && u->pool_off + need <= POOL_SIZE) return 0;
  size_t size = need > POOL_SIZE ? need : POOL_SIZE;
  napi_value buf;
  void *data;
  if (napi_create_buffer(u->env, size, &data, &buf) != napi_ok) return -1;
  if (u->pool_ref != NULL) napi_delete_reference(u->env, u->pool_ref);
  if (napi_create_reference(u->env, buf, 1, &u->pool_ref) != napi_ok) { u->pool_ref = NULL; u->pool = NULL; return -1; }
  u->pool = data;
  u->pool_off = 0;
  return 0;
}

static void read_dst(udp_t *u, struct msghdr *h, int32_t *f) {
  uint8_t *d = (uint8_t *)(f + 12);
  f[F_HASDST] = 0;
  if (!u->pktinfo) return;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL; c = CMSG_NXTHDR(h, c)) {
    if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      struct in6_pktinfo pi;
      memcpy(&pi, CMSG_DATA(c), sizeof pi);
      memcpy(d, &pi.ipi6_addr, 16);
      f[F_HASDST] = 1;
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      struct in_pktinfo pi;
      memcpy(&pi, CMSG_DATA(c), sizeof pi);
      if (u->v6) {
        memset(d, 0, 10);
        d[10] = d[11] = 0xff;
        memcpy(d + 12, &pi.ipi_addr, 4);
      } else {
        memcpy(d, &pi.ipi_addr, 4);
      }
      f[F_HASDST] = 1;
    }
  }
}

// One round: read up to BATCH datagrams, hand them to JavaScript, send what it queued. Returns the count read.
static int read_batch(udp_t *u) {
  for (int i = 0; i < BATCH; i++) {
    struct msghdr *h = &u->rmsg[i].msg_hdr;
    u->riov[i].iov_base = u->scratch + (size_t)i * SLOT;
    u->riov[i].iov_len = SLOT;
    h->msg_iov = &u->riov[i];
    h->msg_iovlen = 1;
    h->msg_name = &u->raddr[i];
    h->msg_namelen = sizeof u->raddr[i];
    h->msg_control = u->pktinfo ? u->rctl[i] : NULL;
    h->msg_controllen = u->pktinfo ? sizeof u->rctl[i] : 0;
    h->msg_flags = 0;
  }
  int n;
  do { n = recvmmsg(u->fd, u->rmsg, BATCH, MSG_DONTWAIT, NULL); } while (n < 0 && errno == EINTR);
  if (n <= 0) return 0; // EAGAIN, or an error the socket reports (nothing to serve)
  size_t total = 0;
  for (int i = 0; i < n; i++) total += u->rmsg[i].msg_len;
  napi_env env = u->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return 0;
  if (ensure_pool(u, total) != 0) { napi_close_handle_scope(env, scope); return 0; }
  for (int i = 0; i < n; i++) {
    int32_t *f = u->meta + i * SLOT_INTS;
    size_t len = u->rmsg[i].msg_len;
    memcpy(u->pool + u->pool_off, u->riov[i].iov_base, len);
    f[F_OFF] = (int32_t)u->pool_off;
    f[F_LEN] = (int32_t)len;
    u->pool_off += len;
    uint8_t *a = (uint8_t *)(f + 8);
    if (u->v6) {
      f[F_PORT] = ntohs(u->raddr[i].sin6_port);
      f[F_SCOPE] = (int32_t)u->raddr[i].sin6_scope_id;
      memcpy(a, &u->raddr[i].sin6_addr, 16);
    } else {
      struct sockaddr_in *s4 = (struct sockaddr_in *)&u->raddr[i];
      f[F_PORT] = ntohs(s4->sin_port);
      f[F_SCOPE] = 0;
      memset(a, 0, 16);
      memcpy(a, &s4->sin_addr, 4);
    }
    read_dst(u, &u->rmsg[i].msg_hdr, f);
  }
  napi_value fn = cb_value(env, u->cb), pool = cb_value(env, u->pool_ref), recv, argv[2], ret;
  napi_get_global(env, &recv);
  argv[0] = pool;
  napi_create_int32(env, n, &argv[1]);
  u->in_batch = 1;
  napi_status st = fn == NULL || pool == NULL ? napi_generic_failure : napi_make_callback(env, u->actx, recv, fn, 2, argv, &ret);
  u->in_batch = 0;
  (void)ret;
  if (st != napi_ok) {
    // The callback threw: the exception goes where an exception of a dgram 'message' listener would
    // (uncaughtException); what it queued before throwing is still sent.
    napi_value e;
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending && napi_get_and_clear_last_exception(env, &e) == napi_ok) napi_fatal_exception(env, e);
  }
  flush_queued(u);
  napi_close_handle_scope(env, scope);
  return n;
}

static void on_poll(uv_poll_t *h, int status, int events) {
  udp_t *u = h->data;
  if (u->closed) return;
  if (status < 0) return;
  if ((events & UV_WRITABLE) && u->phead != NULL) send_pending(u);
  if ((events & UV_READABLE) && !u->closing) {
    // A few full batches per wakeup, then back to the loop so timers and other sockets get their turn.
    for (int r = 0; r < ROUNDS && !u->closing && !u->closed; r++) {
      if (read_batch(u) < BATCH) break;
    }
  }
}

static void destroy(udp_t *u) {
  free(u->scratch);
  free(u);
}

static void on_closed(uv_handle_t *h) {
  udp_t *u = h->data;
  close(u->fd);
  u->fd = -1;
  u->closed = 1;
  free_pending(u);
  if (u->finalized) { destroy(u); return; }
  napi_env env = u->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value cb = u->close_cb != NULL ? cb_value(env, u->close_cb) : NULL;
  if (u->cb != NULL) { napi_delete_reference(env, u->cb); u->cb = NULL; }
  if (u->pool_ref != NULL) { napi_delete_reference(env, u->pool_ref); u->pool_ref = NULL; u->pool = NULL; }
  if (u->close_cb != NULL) { napi_delete_reference(env, u->close_cb); u->close_cb = NULL; }
  if (cb != NULL) {
    napi_value recv, ret;
    napi_get_global(env, &recv);
    if (napi_make_callback(env, u->actx, recv, cb, 0, NULL, &ret) != napi_ok) {
      napi_value e;
      if (napi_get_and_clear_last_exception(env, &e) == napi_ok) napi_fatal_exception(env, e);
    }
  }
  napi_close_handle_scope(env, scope);
}

static void start_close(udp_t *u) {
  if (u->closing && uv_is_closing((uv_handle_t *)&u->poll)) return;
  u->closing = 1;
  uv_close((uv_handle_t *)&u->poll, on_closed);
}

static void finalize(napi_env env, void *data, void *hint) {
  (void)hint;
  udp_t *u = data;
  u->finalized = 1;
  // The references die with the environment; only the shared buffers' owners are released here.
  if (u->meta_ref) napi_delete_reference(env, u->meta_ref);
  if (u->send_meta_ref) napi_delete_reference(env, u->send_meta_ref);
  if (u->send_buf_ref) napi_delete_reference(env, u->send_buf_ref);
  if (u->actx) napi_async_destroy(env, u->actx);
  u->actx = NULL;
  if (u->closed) destroy(u);
  else start_close(u);
}

static udp_t *get(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok) { napi_throw_type_error(env, NULL, "not a udp handle"); return NULL; }
  return p;
}

static napi_value make_ab(napi_env env, size_t size, void **data, napi_ref *ref) {
  napi_value ab;
  if (napi_create_arraybuffer(env, size, data, &ab) != napi_ok) return NULL;
  memset(*data, 0, size);
  if (napi_create_reference(env, ab, 1, ref) != napi_ok) return NULL;
  return ab;
}

// open(host: string, port: number, v6: boolean, pktinfo: boolean, rcvbuf: number, onBatch: function)
//   -> [handle, port, recvMeta: ArrayBuffer, sendMeta: ArrayBuffer, sendBuf: ArrayBuffer]
static napi_value js_open(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  char host[64];
  size_t hl;
  int32_t port, rcvbuf;
  bool v6, pktinfo;
  CHECK(napi_get_value_string_utf8(env, argv[0], host, sizeof host, &hl));
  CHECK(napi_get_value_int32(env, argv[1], &port));
  CHECK(napi_get_value_bool(env, argv[2], &v6));
  CHECK(napi_get_value_bool(env, argv[3], &pktinfo));
  CHECK(napi_get_value_int32(env, argv[4], &rcvbuf));
  struct sockaddr_in6 sa;
  socklen_t salen;
  memset(&sa, 0, sizeof sa);
  if (v6) {
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons((uint16_t)port);
    char *pct = strchr(host, '%');
    if (pct != NULL) {
      *pct = 0;
      unsigned idx = if_nametoindex(pct + 1);
      sa.sin6_scope_id = idx != 0 ? idx : (unsigned)strtoul(pct + 1, NULL, 10);
    }
    if (inet_pton(AF_INET6, host, &sa.sin6_addr) != 1) return throw_errno(env, "bind", EINVAL);
    salen = sizeof sa;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&sa;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) return throw_errno(env, "bind", EINVAL);
    salen = sizeof *s4;
  }
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "socket", errno);
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) { int e = errno; close(fd); return throw_errno(env, "setsockopt", e); }
  if (v6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf); // capped at rmem_max, like dgram's
  if (pktinfo) {
    setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
    if (v6) setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one);
  }
  if (bind(fd, (struct sockaddr *)&sa, salen) != 0) { int e = errno; close(fd); return throw_errno(env, "bind", e); }
  struct sockaddr_in6 bound;
  socklen_t bl = sizeof bound;
  getsockname(fd, (struct sockaddr *)&bound, &bl);
  int actual = ntohs(bound.sin6_port); // sin_port sits at the same offset

  udp_t *u = calloc(1, sizeof *u);
  if (u == NULL) { close(fd); return throw_errno(env, "open", ENOMEM); }
  u->scratch = malloc((size_t)BATCH * SLOT);
  if (u->scratch == NULL) { free(u); close(fd); return throw_errno(env, "open", ENOMEM); }
  u->env = env;
  u->fd = fd;
  u->v6 = v6;
  u->pktinfo = pktinfo;
  napi_value ret, handle, pnum, name, meta, smeta, sbuf;
  void *d;
  if ((meta = make_ab(env, (size_t)BATCH * SLOT_INTS * 4, &d, &u->meta_ref)) == NULL) goto fail;
  u->meta = d;
  // One more slot after the last: the header (entries queued, bytes of the send buffer used).
  if ((smeta = make_ab(env, (size_t)(SEND_SLOTS + 1) * SLOT_INTS * 4, &d, &u->send_meta_ref)) == NULL) goto fail;
  u->send_meta = d;
  if ((sbuf = make_ab(env, SEND_SIZE, &d, &u->send_buf_ref)) == NULL) goto fail;
  u->send_buf = d;
  if (napi_create_reference(env, argv[5], 1, &u->cb) != napi_ok) goto fail;
  napi_create_string_utf8(env, "nodens.udp", NAPI_AUTO_LENGTH, &name);
  if (napi_async_init(env, NULL, name, &u->actx) != napi_ok) goto fail;
  uv_loop_t *loop;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok) goto fail;
  if (uv_poll_init(loop, &u->poll, fd) != 0) goto fail;
  u->poll.data = u;
  u->events = UV_READABLE;
  uv_poll_start(&u->poll, UV_READABLE, on_poll);
  if (napi_create_external(env, u, finalize, NULL, &handle) != napi_ok) { start_close(u); return NULL; }
  napi_create_int32(env, actual, &pnum);
  napi_create_array_with_length(env, 5, &ret);
  napi_set_element(env, ret, 0, handle);
  napi_set_element(env, ret, 1, pnum);
  napi_set_element(env, ret, 2, meta);
  napi_set_element(env, ret, 3, smeta);
  napi_set_element(env, ret, 4, sbuf);
  return ret;
fail:
  close(fd);
  free(u->scratch);
  free(u);
  return throw_errno(env, "open", ENOMEM);
}

// flush(handle): send the replies queued in the send area (see flush_queued); returns how many failed.
static napi_value js_flush(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], r;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  udp_t *u = get(env, argv[0]);
  if (u == NULL) return NULL;
  napi_create_int32(env, flush_queued(u), &r);
  return r;
}

// pending(handle): replies kept after an EAGAIN, not yet sent.
static napi_value js_pending(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], r;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  udp_t *u = get(env, argv[0]);
  if (u == NULL) return NULL;
  napi_create_uint32(env, (uint32_t)u->npending, &r);
  return r;
}

// close(handle, callback): stop reading, drop what is still pending, close the socket; callback once closed.
static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  udp_t *u = get(env, argv[0]);
  if (u == NULL) return NULL;
  if (u->closing || u->closed) return NULL;
  napi_valuetype t;
  if (argc > 1 && napi_typeof(env, argv[1], &t) == napi_ok && t == napi_function) napi_create_reference(env, argv[1], 1, &u->close_cb);
  start_close(u);
  return NULL;
}

// recvBufferSize(handle): SO_RCVBUF as the kernel reports it.
static napi_value js_rcvbuf(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], r;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  udp_t *u = get(env, argv[0]);
  if (u == NULL) return NULL;
  int v = 0;
  socklen_t l = sizeof v;
  if (u->closed || getsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &v, &l) != 0) v = 0;
  napi_create_int32(env, v, &r);
  return r;
}

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
    { "open", NULL, js_open, NULL, NULL, NULL, napi_default, NULL },
    { "flush", NULL, js_flush, NULL, NULL, NULL, napi_default, NULL },
    { "pending", NULL, js_pending, NULL, NULL, NULL, napi_default, NULL },
    { "close", NULL, js_close, NULL, NULL, NULL, napi_default, NULL },
    { "recvBufferSize", NULL, js_rcvbuf, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_value v;
  if (napi_define_properties(env, exports, sizeof props / sizeof props[0], props) != napi_ok) return NULL;
  napi_create_int32(env, BATCH, &v);
  napi_set_named_property(env, exports, "BATCH", v);
  napi_create_int32(env, SEND_SLOTS, &v);
  napi_set_named_property(env, exports, "SEND_SLOTS", v);
  napi_create_int32(env, SEND_SIZE, &v);
  napi_set_named_property(env, exports, "SEND_SIZE", v);
  napi_create_int32(env, SLOT_INTS, &v);
  napi_set_named_property(env, exports, "SLOT_INTS", v);
  return exports;
}
