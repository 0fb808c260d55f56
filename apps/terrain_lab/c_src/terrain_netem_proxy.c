/* terrain_netem_proxy: the native proxy of an emulated node (docs/NETEM.md, "Native proxy").
 *
 * One process per emulated VM, started by terrain_lab_netem_server as an Erlang port
 * ({packet, 4} frames on stdin/stdout). It carries every distribution connection the VM
 * opens to another node of its cluster, in both directions, with the link model of
 * terrain_lab_netem_link: a FIFO wire with a serialisation rate and a propagation delay
 * (latency, uniform jitter), never reordering, and a window beyond which it stops reading
 * a source (TCP holds the sender back).
 *
 * Timing: one timerfd armed (absolute, CLOCK_MONOTONIC, no timer slack) at the earliest
 * due time of all connections; chunks are stamped with the kernel's receive time
 * (SO_TIMESTAMPNS), so the proxy's own wake-up on arrival does not add to the delay.
 * Nothing spins: an idle connection costs nothing between its chunks.
 *
 * Commands (Erlang -> proxy), all integers big-endian:
 *   'O' Id:32 Family:8 (4|6) Ip:4|16 bytes Source:4|16 bytes Port:16 Latency:64 Jitter:64
 *       Bandwidth:64 Window:64 AcceptMs:32 SendMs:32
 *       listen on a fresh port of Source (the VM's own address), accept one connection
 *       (within AcceptMs), connect it from Source to Ip:Port; answers 'o' Id:32
 *       ListenPort:16, or 'e' Id:32 Reason (text).
 *       Latency and jitter in ns, bandwidth in bytes/s (0: unlimited), window in bytes.
 *   'L' Id:32 Latency:64 Jitter:64 Bandwidth:64 Window:64   new link options, both ways;
 *       queued chunks keep their due times.
 *   'C' Id:32   close the connection now (partition); queued bytes are dropped.
 *   'S'         statistics: 's' Count:32 then per connection Id:32 State:8 (0 accepting,
 *       1 connecting, 2 carrying) and for each direction (out = accepted -> target, then
 *       in) Bytes:64 Queued:64 Paused:8; then Wakeups:64, and how late chunks left against their
 *       due times: Count:64 SumNs:64 MaxNs:64 and 8 counts of lateness < 10, 20, 50, 100, 200, 500,
 *       1000 us and >= 1000 us (each chunk counted once, when its first byte is written).
 * Events (proxy -> Erlang):
 *   'x' Id:32 Reason (text)   a connection ended (closed by either side, an error, a
 *       timeout, or 'C'); sent once per connection that was opened.
 * End of stdin (the VM is gone) ends the program and every connection.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define READ_SIZE (256 * 1024)
#define MAX_IOV 64
#define NEVER INT64_MAX

enum kind { K_STDIN, K_TIMER, K_LISTEN, K_LOCAL, K_REMOTE };
enum state { S_ACCEPTING, S_CONNECTING, S_CARRYING };

struct chunk {
    struct chunk *next;
    int64_t due;
    uint32_t len, off;
    char data[];
};

struct link {
    int64_t latency, jitter; /* ns */
    uint64_t bandwidth;      /* bytes/s, 0: unlimited */
    uint64_t window;         /* bytes */
};

struct direction {
    int src, dst;            /* fds; src is read, dst written */
    struct chunk *head, *tail;
    uint64_t queued, bytes;  /* bytes held, bytes delivered */
    int64_t free_at, last_due; /* -1: nothing yet */
    int64_t blocked_since;   /* -1: dst writable */
    int paused, eof;
};

struct conn {
    uint32_t id;
    enum state state;
    int lfd, a, b;           /* listen, accepted (distribution), remote (the target) */
    struct sockaddr_storage source; /* the VM's own address: listen on it, connect from it */
    struct sockaddr_storage target;
    socklen_t target_len;
    int64_t deadline;        /* accept or connect deadline */
    int64_t send_timeout;    /* ns */
    struct link link;
    struct direction out, in; /* out: a -> b, in: b -> a */
    uint64_t rng;
    struct conn *next;
};

static int epfd, tfd;
static struct conn *conns;
static uint64_t wakeups;
/* lateness of the chunks written (ns past their due time) */
#define LATE_BUCKETS 8
static const int64_t late_bounds[LATE_BUCKETS - 1] = {10000, 20000, 50000, 100000, 200000, 500000, 1000000};
static uint64_t late_count, late_sum, late_max, late_hist[LATE_BUCKETS];
static int64_t armed = -2;
static char *inbuf;
static size_t inlen, incap;
static char readbuf[READ_SIZE];

static void die(const char *what) {
    fprintf(stderr, "terrain_netem_proxy: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- frames to Erlang ---- */

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            exit(0); /* the VM is gone */
        }
        p += w;
        n -= (size_t)w;
    }
}

static void frame(const char *body, size_t n) {
    char hdr[4] = {(char)(n >> 24), (char)(n >> 16), (char)(n >> 8), (char)n};
    write_all(1, hdr, 4);
    write_all(1, body, n);
}

static char *put32(char *p, uint32_t v) {
    *p++ = (char)(v >> 24); *p++ = (char)(v >> 16); *p++ = (char)(v >> 8); *p++ = (char)v;
    return p;
}

static char *put64(char *p, uint64_t v) {
    p = put32(p, (uint32_t)(v >> 32));
    return put32(p, (uint32_t)v);
}

static uint32_t get32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t get64(const unsigned char *p) {
    return ((uint64_t)get32(p) << 32) | get32(p + 4);
}

static void event_text(char tag, uint32_t id, const char *fmt, ...) {
    char body[256], *p = body;
    *p++ = tag;
    p = put32(p, id);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(p, sizeof body - 5, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if (n > (int)sizeof body - 6) n = (int)sizeof body - 6;
    frame(body, 5 + (size_t)n);
}

/* ---- epoll ---- */

/* An event names its connection by id (not by pointer: a connection may end, and
 * another take its memory, earlier in the same batch of events) and the socket's kind. */
static void watch(int op, int fd, uint32_t id, enum kind kind, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.u64 = ((uint64_t)id << 8) | kind};
    if (epoll_ctl(epfd, op, fd, &ev) < 0) die("epoll_ctl");
}

/* The events a carried socket wants: read while its direction reads, write while the
 * direction that writes it is blocked. */
static void rewatch(struct conn *c, int fd) {
    struct direction *reads = fd == c->a ? &c->out : &c->in;
    struct direction *writes = fd == c->a ? &c->in : &c->out;
    uint32_t ev = 0;
    if (!reads->paused && !reads->eof) ev |= EPOLLIN;
    if (writes->blocked_since >= 0) ev |= EPOLLOUT;
    watch(EPOLL_CTL_MOD, fd, c->id, fd == c->a ? K_LOCAL : K_REMOTE, ev);
}

/* ---- connections ---- */

static void free_queue(struct direction *d) {
    struct chunk *k = d->head;
    while (k) { struct chunk *n = k->next; free(k); k = n; }
    d->head = d->tail = NULL;
    d->queued = 0;
}

static void end_conn(struct conn *c, const char *why) {
    if (c->lfd >= 0) close(c->lfd);
    if (c->a >= 0) close(c->a);
    if (c->b >= 0) close(c->b);
    free_queue(&c->out);
    free_queue(&c->in);
    struct conn **pp = &conns;
    while (*pp != c) pp = &(*pp)->next;
    *pp = c->next;
    event_text('x', c->id, "%s", why);
    free(c);
}

static struct conn *find(uint32_t id) {
    for (struct conn *c = conns; c; c = c->next)
        if (c->id == id) return c;
    return NULL;
}

static uint64_t next_random(struct conn *c) { /* xorshift64* */
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 2685821657736338717ULL;
}

/* The link model (terrain_lab_netem_link:schedule/5). */
static int64_t schedule(struct conn *c, struct direction *d, int64_t arrival, uint32_t bytes) {
    int64_t start = d->free_at >= 0 && d->free_at > arrival ? d->free_at : arrival;
    int64_t end = start + (c->link.bandwidth ? (int64_t)((uint64_t)bytes * 1000000000ULL / c->link.bandwidth) : 0);
    int64_t delay = c->link.latency;
    if (c->link.jitter > 0) {
        double u = (double)(next_random(c) >> 11) / 9007199254740992.0; /* [0, 1) */
        delay = c->link.latency + (int64_t)((2 * u - 1) * (double)c->link.jitter);
        if (delay < 0) delay = 0;
    }
    int64_t due = end + delay;
    if (d->last_due >= 0 && d->last_due > due) due = d->last_due;
    d->free_at = end;
    d->last_due = due;
    return due;
}

static void late_record(int64_t late);

/* Reads what `d`'s source holds (up to its window), stamping each read with the
 * kernel's receive time. Returns 0, or -1 when the connection ended. */
static int read_source(struct conn *c, struct direction *d) {
    for (int reads = 0; reads < 16 && !d->paused && !d->eof; reads++) {
        char control[CMSG_SPACE(sizeof(struct timespec))];
        struct iovec iov = {readbuf, sizeof readbuf};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof control};
        ssize_t n = recvmsg(d->src, &msg, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            char why[96];
            snprintf(why, sizeof why, "read: %s", strerror(errno));
            end_conn(c, why);
            return -1;
        }
        int64_t now = now_ns(), arrival = now;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(cm), sizeof ts);
                int64_t age = realtime_ns() - ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
                if (age > 0 && age < 1000000000) arrival = now - age;
            }
        }
        if (n == 0) {
            d->eof = 1;
            if (!d->head) { end_conn(c, "closed"); return -1; }
            rewatch(c, d->src);
            return 0;
        }
        int64_t due = schedule(c, d, arrival, (uint32_t)n);
        size_t sent = 0;
        if (due <= now && !d->head && d->blocked_since < 0) {
            /* due already (a link without delay) and nothing in front: written from the
             * read buffer at once, without a copy; only what the sink does not take waits */
            ssize_t w = write(d->dst, readbuf, (size_t)n);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                char why[96];
                snprintf(why, sizeof why, "write: %s", strerror(errno));
                end_conn(c, why);
                return -1;
            }
            if (w > 0) {
                late_record(now_ns() - due);
                sent = (size_t)w;
                d->bytes += (uint64_t)w;
            }
            if (sent == (size_t)n) {
                if ((size_t)n < sizeof readbuf) return 0;
                continue;
            }
        }
        struct chunk *k = malloc(sizeof *k + (size_t)n - sent);
        if (!k) die("malloc");
        memcpy(k->data, readbuf + sent, (size_t)n - sent);
        k->len = (uint32_t)((size_t)n - sent);
        k->off = 0;
        k->next = NULL;
        k->due = due;
        n -= (ssize_t)sent;
        if (d->tail) d->tail->next = k; else d->head = k;
        d->tail = k;
        d->queued += (uint64_t)n;
        if (d->queued > c->link.window) {
            d->paused = 1;
            rewatch(c, d->src);
        }
        if ((size_t)n + sent < sizeof readbuf) return 0;
    }
    return 0;
}

static void late_record(int64_t late) {
    if (late < 0) late = 0;
    int b = 0;
    while (b < LATE_BUCKETS - 1 && late >= late_bounds[b]) b++;
    late_hist[b]++;
    late_count++;
    late_sum += (uint64_t)late;
    if ((uint64_t)late > late_max) late_max = (uint64_t)late;
}

/* Writes every due chunk of `d` (in one writev when it can). Returns 0, or -1 when the
 * connection ended. */
static int deliver(struct conn *c, struct direction *d, int64_t now) {
    while (d->head && d->head->due <= now) {
        struct iovec iov[MAX_IOV];
        int n = 0;
        for (struct chunk *k = d->head; k && k->due <= now && n < MAX_IOV; k = k->next, n++) {
            iov[n].iov_base = k->data + k->off;
            iov[n].iov_len = k->len - k->off;
        }
        int64_t at = now_ns();
        ssize_t w = writev(d->dst, iov, n);
        if (w > 0) { /* the chunks whose first byte left now */
            ssize_t before = 0;
            struct chunk *k = d->head;
            for (int i = 0; i < n && k && before < w; i++, k = k->next) {
                if (k->off == 0) late_record(at - k->due);
                before += (ssize_t)iov[i].iov_len;
            }
        }
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (d->blocked_since < 0) {
                    d->blocked_since = now;
                    rewatch(c, d->dst);
                }
                return 0;
            }
            char why[96];
            snprintf(why, sizeof why, "write: %s", strerror(errno));
            end_conn(c, why);
            return -1;
        }
        d->bytes += (uint64_t)w;
        d->queued -= (uint64_t)w;
        while (w > 0) {
            struct chunk *k = d->head;
            uint32_t left = k->len - k->off;
            if ((uint64_t)w >= left) {
                w -= left;
                d->head = k->next;
                if (!d->head) d->tail = NULL;
                free(k);
            } else {
                k->off += (uint32_t)w;
                w = 0;
            }
        }
    }
    if (d->blocked_since >= 0) {
        d->blocked_since = -1;
        rewatch(c, d->dst);
    }
    if (d->paused && d->queued < c->link.window / 2) {
        d->paused = 0;
        rewatch(c, d->src);
    }
    if (d->eof && !d->head) {
        end_conn(c, "closed");
        return -1;
    }
    return 0;
}

static void carry(struct conn *c) {
    c->state = S_CARRYING;
    c->out = (struct direction){.src = c->a, .dst = c->b, .free_at = -1, .last_due = -1, .blocked_since = -1};
    c->in = (struct direction){.src = c->b, .dst = c->a, .free_at = -1, .last_due = -1, .blocked_since = -1};
    watch(EPOLL_CTL_ADD, c->a, c->id, K_LOCAL, EPOLLIN);
    watch(EPOLL_CTL_MOD, c->b, c->id, K_REMOTE, EPOLLIN);
}

static void socket_options(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void accepted(struct conn *c) {
    int fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return;
        char why[96];
        snprintf(why, sizeof why, "accept: %s", strerror(errno));
        end_conn(c, why);
        return;
    }
    close(c->lfd); /* one connection per proxy */
    c->lfd = -1;
    c->a = fd;
    socket_options(fd);
    int b = socket(c->target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (b < 0) { end_conn(c, "socket"); return; }
    c->b = b;
    socket_options(b);
    /* from the VM's own address; the port is chosen by connect (per 4-tuple), not by bind */
    int one = 1;
    setsockopt(b, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (bind(b, (struct sockaddr *)&c->source, c->target_len) < 0) {
        char why[96];
        snprintf(why, sizeof why, "bind: %s", strerror(errno));
        end_conn(c, why);
        return;
    }
    if (connect(b, (struct sockaddr *)&c->target, c->target_len) == 0) {
        watch(EPOLL_CTL_ADD, b, c->id, K_REMOTE, EPOLLIN);
        carry(c);
    } else if (errno == EINPROGRESS) {
        c->state = S_CONNECTING;
        watch(EPOLL_CTL_ADD, b, c->id, K_REMOTE, EPOLLOUT);
    } else {
        char why[96];
        snprintf(why, sizeof why, "connect: %s", strerror(errno));
        end_conn(c, why);
    }
}

static void connected(struct conn *c) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->b, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) {
        char why[96];
        snprintf(why, sizeof why, "connect: %s", strerror(err));
        end_conn(c, why);
        return;
    }
    carry(c);
}

static void set_link(struct link *l, const unsigned char *p) {
    l->latency = (int64_t)get64(p);
    l->jitter = (int64_t)get64(p + 8);
    l->bandwidth = get64(p + 16);
    l->window = get64(p + 24);
}

static void open_conn(const unsigned char *p, size_t n) {
    if (n < 6) return;
    uint32_t id = get32(p + 1);
    int family = p[5];
    size_t iplen = family == 6 ? 16 : 4;
    if (n != 6 + 2 * iplen + 2 + 32 + 8) { event_text('e', id, "bad open command (%zu bytes)", n); return; }
    const unsigned char *q = p + 6 + 2 * iplen;
    struct conn *c = calloc(1, sizeof *c);
    if (!c) die("calloc");
    c->id = id;
    c->lfd = c->a = c->b = -1;
    struct sockaddr_storage listen_at;
    memset(&listen_at, 0, sizeof listen_at);
    if (family == 6) {
        struct sockaddr_in6 *t = (struct sockaddr_in6 *)&c->target;
        t->sin6_family = AF_INET6;
        memcpy(&t->sin6_addr, p + 6, 16);
        t->sin6_port = htons((uint16_t)((q[0] << 8) | q[1]));
        c->target_len = sizeof *t;
    } else {
        struct sockaddr_in *t = (struct sockaddr_in *)&c->target;
        t->sin_family = AF_INET;
        memcpy(&t->sin_addr, p + 6, 4);
        t->sin_port = htons((uint16_t)((q[0] << 8) | q[1]));
        c->target_len = sizeof *t;
    }
    memcpy(&listen_at, &c->target, c->target_len);
    if (family == 6) {
        memcpy(&((struct sockaddr_in6 *)&listen_at)->sin6_addr, p + 6 + iplen, 16);
        ((struct sockaddr_in6 *)&listen_at)->sin6_port = 0;
    } else {
        memcpy(&((struct sockaddr_in *)&listen_at)->sin_addr, p + 6 + iplen, 4);
        ((struct sockaddr_in *)&listen_at)->sin_port = 0;
    }
    memcpy(&c->source, &listen_at, c->target_len);
    set_link(&c->link, q + 2);
    int64_t accept_ms = get32(q + 34), send_ms = get32(q + 38);
    c->send_timeout = send_ms * 1000000;
    c->rng = ((uint64_t)id << 32) ^ (uint64_t)now_ns() ^ 0x9E3779B97F4A7C15ULL;
    if (!c->rng) c->rng = 1;
    int lfd = socket(c->target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&listen_at, c->target_len) < 0 || listen(lfd, 1) < 0
        || getsockname(lfd, (struct sockaddr *)&bound, &blen) < 0) {
        event_text('e', id, "listen: %s", strerror(errno));
        if (lfd >= 0) close(lfd);
        free(c);
        return;
    }
    c->lfd = lfd;
    c->deadline = now_ns() + accept_ms * 1000000;
    watch(EPOLL_CTL_ADD, lfd, id, K_LISTEN, EPOLLIN);
    c->next = conns;
    conns = c;
    uint16_t port = ntohs(family == 6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                      : ((struct sockaddr_in *)&bound)->sin_port);
    char body[7] = {'o'};
    put32(body + 1, id);
    body[5] = (char)(port >> 8);
    body[6] = (char)port;
    frame(body, sizeof body);
}

static void stats(void) {
    size_t count = 0;
    for (struct conn *c = conns; c; c = c->next) count++;
    size_t size = 1 + 4 + count * (4 + 1 + 2 * 17) + 8 + 8 * (3 + LATE_BUCKETS);
    char *body = malloc(size), *p = body;
    if (!body) die("malloc");
    *p++ = 's';
    p = put32(p, (uint32_t)count);
    for (struct conn *c = conns; c; c = c->next) {
        p = put32(p, c->id);
        *p++ = (char)c->state;
        struct direction *ds[2] = {&c->out, &c->in};
        for (int i = 0; i < 2; i++) {
            p = put64(p, ds[i]->bytes);
            p = put64(p, ds[i]->queued);
            *p++ = (char)ds[i]->paused;
        }
    }
    p = put64(p, wakeups);
    p = put64(p, late_count);
    p = put64(p, late_sum);
    p = put64(p, late_max);
    for (int i = 0; i < LATE_BUCKETS; i++) p = put64(p, late_hist[i]);
    frame(body, (size_t)(p - body));
    free(body);
}

static void command(const unsigned char *p, size_t n) {
    if (n == 0) return;
    struct conn *c;
    switch (p[0]) {
    case 'O':
        open_conn(p, n);
        break;
    case 'L':
        if (n == 5 + 32 && (c = find(get32(p + 1)))) set_link(&c->link, p + 5);
        break;
    case 'C':
        if (n == 5 && (c = find(get32(p + 1)))) end_conn(c, "cut");
        break;
    case 'S':
        stats();
        break;
    default:
        fprintf(stderr, "terrain_netem_proxy: unknown command %d\n", p[0]);
    }
}

static void read_commands(void) {
    if (incap - inlen < 65536) {
        incap = incap ? incap * 2 : 131072;
        inbuf = realloc(inbuf, incap);
        if (!inbuf) die("realloc");
    }
    ssize_t n = read(0, inbuf + inlen, incap - inlen);
    if (n == 0) exit(0); /* the VM closed the port or died */
    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) return;
        exit(0);
    }
    inlen += (size_t)n;
    size_t at = 0;
    while (inlen - at >= 4) {
        uint32_t len = get32((unsigned char *)inbuf + at);
        if (inlen - at - 4 < len) break;
        command((unsigned char *)inbuf + at + 4, len);
        at += 4 + len;
    }
    memmove(inbuf, inbuf + at, inlen - at);
    inlen -= at;
}

/* Delivers what is due, ends what timed out, and arms the timer at the next due time. */
static void tick(void) {
    int64_t now = now_ns(), next = NEVER;
    struct conn *c = conns;
    while (c) {
        struct conn *following = c->next; /* c may end */
        if (c->state != S_CARRYING) {
            if (now >= c->deadline) {
                end_conn(c, c->state == S_ACCEPTING ? "accept: timeout" : "connect: timeout");
                c = following;
                continue;
            }
            if (c->deadline < next) next = c->deadline;
            c = following;
            continue;
        }
        int ended = 0;
        struct direction *ds[2] = {&c->out, &c->in};
        for (int i = 0; i < 2 && !ended; i++) {
            struct direction *d = ds[i];
            if (d->blocked_since >= 0) {
                if (now - d->blocked_since > c->send_timeout) { end_conn(c, "write: timeout"); ended = 1; break; }
                if (d->blocked_since + c->send_timeout < next) next = d->blocked_since + c->send_timeout;
                continue;
            }
            if (d->head && d->head->due <= now && deliver(c, d, now) < 0) { ended = 1; break; }
            if (d->blocked_since < 0 && d->head && d->head->due < next) next = d->head->due;
        }
        c = following;
    }
    if (next != armed) {
        struct itimerspec its = {0};
        if (next != NEVER) {
            its.it_value.tv_sec = next / 1000000000;
            its.it_value.tv_nsec = next % 1000000000;
            if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
        }
        if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) die("timerfd_settime");
        armed = next;
    }
}

int main(void) {
    prctl(PR_SET_TIMERSLACK, 1UL);
    prctl(PR_SET_PDEATHSIG, 9); /* belt and braces: stdin's end also ends it */
    epfd = epoll_create1(EPOLL_CLOEXEC);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (epfd < 0 || tfd < 0) die("epoll/timerfd");
    watch(EPOLL_CTL_ADD, 0, 0, K_STDIN, EPOLLIN);
    watch(EPOLL_CTL_ADD, tfd, 0, K_TIMER, EPOLLIN);
    struct epoll_event events[64];
    for (;;) {
        int n = epoll_wait(epfd, events, 64, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        wakeups++;
        for (int i = 0; i < n; i++) {
            enum kind kind = (enum kind)(events[i].data.u64 & 0xff);
            uint32_t ev = events[i].events;
            switch (kind) {
            case K_STDIN:
                read_commands();
                break;
            case K_TIMER: {
                uint64_t expirations;
                if (read(tfd, &expirations, sizeof expirations) < 0) { /* nothing to do */ }
                armed = -2; /* expired: arm again */
                break;
            }
            default: {
                struct conn *c = find((uint32_t)(events[i].data.u64 >> 8));
                if (!c) break; /* ended earlier in this batch */
                if (kind == K_LISTEN) { if (c->state == S_ACCEPTING) accepted(c); break; }
                if (c->state == S_CONNECTING) { connected(c); break; }
                struct direction *reads = kind == K_LOCAL ? &c->out : &c->in;
                struct direction *writes = kind == K_LOCAL ? &c->in : &c->out;
                if ((ev & (EPOLLHUP | EPOLLERR)) && (reads->paused || reads->eof)) {
                    /* reset (or both ways shut) while not reading: nothing more will come */
                    end_conn(c, "reset");
                    break;
                }
                if ((ev & EPOLLOUT) && writes->blocked_since >= 0) {
                    writes->blocked_since = -1;
                    rewatch(c, writes->dst);
                    if (deliver(c, writes, now_ns()) < 0) break;
                }
                if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_source(c, reads);
            }
            }
        }
        tick();
    }
}
