/*
 * openloop: an open-loop HTTP/1.1 load generator for the receiver bench.
 *
 *   openloop HOST PORT RATE SECONDS CONNECTIONS SOURCE FILE...
 *
 * Offers RATE requests per second for SECONDS, whatever the answers take:
 * request i is due at start + i / RATE, goes out on the first idle keep-alive
 * connection (of CONNECTIONS), and waits in a queue while none is idle.  Its
 * latency runs from the moment it was due, not from when it was sent, so a
 * stall of the server counts for every request it delayed (wrk, a closed
 * loop, sends less while the server stalls and reports only the requests it
 * managed to send).  The requests are the bench's pre-signed deliveries
 * (bench/gen_requests.pl: "<Stripe-Signature>\t<body>" per line) POSTed to
 * /hooks/SOURCE, each FILE read in turn; running out of them is an error
 * (repeats would be answered "duplicate" and cost less).
 *
 * Prints one line:
 *   RESULT offered=N sent=N ok=N non2xx=N errors=N unsent=N duration_us=N
 *          rate_ok=N p50_us=N p90_us=N p99_us=N p999_us=N max_us=N max_queue=N
 * Exit status 0 when it ran, 2 on bad arguments, 1 when it could not run.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct Conn
{
	int			fd;
	int			busy;			/* a request written or being written */
	int			connecting;
	int64_t		due_ns;			/* when the request in flight was due */
	const char *out;			/* the request being written */
	size_t		out_len;
	size_t		out_off;
	char		in[8192];
	size_t		in_len;
} Conn;

static struct sockaddr_in addr;
static char **reqs;
static size_t *req_lens;
static size_t nreqs, next_req;
static int64_t *lat;			/* latencies of the answered requests, ns */
static size_t nlat, lat_cap;
static int64_t *queue;			/* due times of requests waiting for a connection */
static size_t q_head, q_len, q_cap, max_queue;
static long n_ok, n_non2xx, n_err, n_sent;
static int	ep;
static int64_t start_ns;
static long per_sec[3600];		/* answers per second of the run, by completion */
static int64_t per_sec_max[3600];	/* their worst latency */

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static void
load(const char *path, const char *source)
{
	FILE	   *f = fopen(path, "r");
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		n;

	if (!f)
		die(path);
	while ((n = getline(&line, &cap, f)) > 0)
	{
		char	   *tab = memchr(line, '\t', n);
		size_t		blen;
		char	   *r;
		int			len;

		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (!tab)
			continue;
		*tab = '\0';
		blen = n - (tab + 1 - line);
		r = malloc(blen + strlen(line) + strlen(source) + 256);
		if (!r)
			die("malloc");
		len = sprintf(r, "POST /hooks/%s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
					  "Stripe-Signature: %s\r\nContent-Length: %zu\r\n\r\n", source, line, blen);
		memcpy(r + len, tab + 1, blen);
		reqs = realloc(reqs, (nreqs + 1) * sizeof(*reqs));
		req_lens = realloc(req_lens, (nreqs + 1) * sizeof(*req_lens));
		if (!reqs || !req_lens)
			die("realloc");
		reqs[nreqs] = r;
		req_lens[nreqs++] = len + blen;
	}
	free(line);
	fclose(f);
}

static void
conn_open(Conn *c)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
	int			one = 1;

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (c->fd < 0)
		die("socket");
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *) &addr, sizeof(addr)) < 0 && errno != EINPROGRESS)
		die("connect");
	c->connecting = 1;
	c->busy = 0;
	c->in_len = 0;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		die("epoll_ctl");
}

/* the connection failed or was closed: the request on it is an error */
static void
conn_reset(Conn *c)
{
	if (c->busy)
		n_err++;
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	conn_open(c);
}

static void
want_out(Conn *c, int on)
{
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};

	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void
conn_write(Conn *c)
{
	while (c->out_off < c->out_len)
	{
		ssize_t		n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);

		if (n < 0)
		{
			if (errno == EAGAIN)
			{
				want_out(c, 1);
				return;
			}
			conn_reset(c);
			return;
		}
		c->out_off += n;
	}
	want_out(c, 0);
}

static int
conn_send(Conn *c, int64_t due)
{
	if (next_req >= nreqs)
		return -1;
	c->busy = 1;
	c->due_ns = due;
	c->out = reqs[next_req];
	c->out_len = req_lens[next_req++];
	c->out_off = 0;
	n_sent++;
	if (!c->connecting)
		conn_write(c);
	return 0;
}

static void
record(int64_t ns)
{
	if (nlat == lat_cap)
	{
		lat_cap = lat_cap ? lat_cap * 2 : 65536;
		lat = realloc(lat, lat_cap * sizeof(*lat));
		if (!lat)
			die("realloc");
	}
	lat[nlat++] = ns;
}

/* a whole answer in c->in? returns its length, 0 if not yet, -1 if bad */
static ssize_t
answer_len(Conn *c, int *status)
{
	char	   *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
	char	   *p;
	size_t		hlen;
	long		clen = 0;

	if (!end)
		return c->in_len >= sizeof(c->in) ? -1 : 0;
	hlen = end + 4 - c->in;
	if (c->in_len < 12 || strncmp(c->in, "HTTP/1.", 7) != 0)
		return -1;
	*status = atoi(c->in + 9);
	for (p = c->in; p && p < end; p = memmem(p, end - p, "\r\n", 2), p = p ? p + 2 : NULL)
		if (strncasecmp(p, "Content-Length:", 15) == 0)
			clen = atol(p + 15);
	if (clen < 0 || hlen + clen > sizeof(c->in))
		return -1;
	return c->in_len >= hlen + clen ? (ssize_t) (hlen + clen) : 0;
}

static int
cmp64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a,
				y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

static int64_t
pct(double p)
{
	size_t		i;

	if (nlat == 0)
		return 0;
	i = (size_t) (p / 100.0 * nlat);
	return lat[i >= nlat ? nlat - 1 : i];
}

int
main(int argc, char **argv)
{
	double		rate;
	double		seconds;
	int			nconn;
	Conn	   *conns;
	int64_t		start, end, interval_ns, last_answer = 0;
	long		offered, issued = 0;
	struct epoll_event evs[256];

	if (argc < 8)
	{
		fprintf(stderr, "usage: openloop HOST PORT RATE SECONDS CONNECTIONS SOURCE FILE...\n");
		return 2;
	}
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons(atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1)
	{
		fprintf(stderr, "openloop: bad address %s\n", argv[1]);
		return 2;
	}
	rate = atof(argv[3]);
	seconds = atof(argv[4]);
	nconn = atoi(argv[5]);
	if (rate <= 0 || seconds <= 0 || nconn <= 0)
	{
		fprintf(stderr, "openloop: RATE, SECONDS and CONNECTIONS must be positive\n");
		return 2;
	}
	for (int i = 7; i < argc; i++)
		load(argv[i], argv[6]);
	offered = (long) (rate * seconds);
	if ((long) nreqs < offered)
	{
		fprintf(stderr, "openloop: %zu requests for %ld offered\n", nreqs, offered);
		return 1;
	}
	interval_ns = (int64_t) (1e9 / rate);
	ep = epoll_create1(0);
	if (ep < 0)
		die("epoll_create1");
	conns = calloc(nconn, sizeof(*conns));
	q_cap = 1024;
	queue = malloc(q_cap * sizeof(*queue));
	if (!conns || !queue)
		die("calloc");
	for (int i = 0; i < nconn; i++)
		conn_open(&conns[i]);

	start = start_ns = now_ns();
	end = start + (int64_t) (seconds * 1e9);
	for (;;)
	{
		int64_t		t = now_ns();
		struct timespec timeout;
		int			n;
		int			inflight = 0;

		/* everything due by now: onto an idle connection, or queued */
		while (issued < offered && start + issued * interval_ns <= t)
		{
			int64_t		due = start + issued * interval_ns;

			if (q_len == q_cap)
			{
				int64_t    *nq = malloc(q_cap * 2 * sizeof(*nq));

				if (!nq)
					die("malloc");
				for (size_t i = 0; i < q_len; i++)
					nq[i] = queue[(q_head + i) % q_cap];
				free(queue);
				queue = nq;
				q_head = 0;
				q_cap *= 2;
			}
			queue[(q_head + q_len++) % q_cap] = due;
			issued++;
		}
		for (int i = 0; i < nconn && q_len > 0; i++)
			if (!conns[i].busy)
			{
				if (conn_send(&conns[i], queue[q_head]) < 0)
					break;
				q_head = (q_head + 1) % q_cap;
				q_len--;
			}
		if (q_len > max_queue)
			max_queue = q_len;
		for (int i = 0; i < nconn; i++)
			inflight += conns[i].busy;
		/* offered all, and every answer in (or 10 s past the end) */
		if (issued >= offered && q_len == 0 && inflight == 0)
			break;
		if (t > end + 10000000000LL)
			break;
		/*
		 * sleep until the next request is due (to the nanosecond: a
		 * millisecond's timeout of 0 would spin a core the server needs)
		 */
		timeout.tv_sec = 0;
		timeout.tv_nsec = 100000000;
		if (issued < offered)
		{
			int64_t		next = start + issued * interval_ns;

			timeout.tv_nsec = next > t ? next - t : 0;
			timeout.tv_sec = timeout.tv_nsec / 1000000000;
			timeout.tv_nsec %= 1000000000;
		}
		n = epoll_pwait2(ep, evs, 256, &timeout, NULL);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++)
		{
			Conn	   *c = evs[i].data.ptr;

			if (evs[i].events & (EPOLLERR | EPOLLHUP) && !(evs[i].events & EPOLLIN))
			{
				conn_reset(c);
				continue;
			}
			if (c->connecting && (evs[i].events & EPOLLOUT))
			{
				int			err = 0;
				socklen_t	len = sizeof(err);

				getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
				if (err)
				{
					conn_reset(c);
					continue;
				}
				c->connecting = 0;
				if (c->busy)
					conn_write(c);
				else
					want_out(c, 0);
				continue;
			}
			if ((evs[i].events & EPOLLOUT) && c->busy && c->out_off < c->out_len)
				conn_write(c);
			if (evs[i].events & EPOLLIN)
			{
				ssize_t		r = read(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len);
				ssize_t		alen;
				int			status = 0;

				if (r <= 0)
				{
					if (r < 0 && errno == EAGAIN)
						continue;
					conn_reset(c);
					continue;
				}
				c->in_len += r;
				alen = answer_len(c, &status);
				if (alen < 0 || (alen > 0 && !c->busy))
				{
					conn_reset(c);
					continue;
				}
				if (alen == 0)
					continue;
				last_answer = now_ns();
				record(last_answer - c->due_ns);
				{
					int64_t		sec = (last_answer - start_ns) / 1000000000;

					if (sec >= 0 && sec < 3600)
					{
						per_sec[sec]++;
						if (last_answer - c->due_ns > per_sec_max[sec])
							per_sec_max[sec] = last_answer - c->due_ns;
					}
				}
				if (status >= 200 && status < 300)
					n_ok++;
				else
					n_non2xx++;
				memmove(c->in, c->in + alen, c->in_len - alen);
				c->in_len -= alen;
				c->busy = 0;		/* a close after it: read() sees it */
			}
		}
	}
	/* second by second on stderr: where a stall was */
	for (int i = 0; i < 3600 && i * 1e9 < (double) (last_answer - start); i++)
		fprintf(stderr, "second %d: %ld answers, worst %.1f ms\n", i, per_sec[i], per_sec_max[i] / 1e6);
	qsort(lat, nlat, sizeof(*lat), cmp64);
	{
		int64_t		dur = (last_answer > start ? last_answer : now_ns()) - start;
		long		unanswered = 0;

		for (int i = 0; i < nconn; i++)
			unanswered += conns[i].busy;
		printf("RESULT offered=%ld sent=%ld ok=%ld non2xx=%ld errors=%ld unsent=%zu unanswered=%ld duration_us=%lld "
			   "rate_ok=%.0f p50_us=%lld p90_us=%lld p99_us=%lld p999_us=%lld max_us=%lld max_queue=%zu\n",
			   offered, n_sent, n_ok, n_non2xx, n_err, q_len + (size_t) (offered - issued), unanswered,
			   (long long) (dur / 1000), n_ok / (dur / 1e9),
			   (long long) (pct(50) / 1000), (long long) (pct(90) / 1000), (long long) (pct(99) / 1000),
			   (long long) (pct(99.9) / 1000), (long long) (nlat ? lat[nlat - 1] / 1000 : 0), max_queue);
	}
	return 0;
}
