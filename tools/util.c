/*
 * util.c
 *		Buffers, PRNG, time helpers and number parsing shared by every
 *		webhook-sim command.  See util.h for the contracts.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "util.h"

void *
xmalloc(size_t n)
{
	void	   *p = malloc(n ? n : 1);

	if (p == NULL)
	{
		fputs("webhook-sim: out of memory\n", stderr);
		abort();
	}
	return p;
}

void *
xcalloc(size_t n, size_t size)
{
	void	   *p = calloc(n ? n : 1, size ? size : 1);

	if (p == NULL)
	{
		fputs("webhook-sim: out of memory\n", stderr);
		abort();
	}
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	void	   *q = realloc(p, n ? n : 1);

	if (q == NULL)
	{
		fputs("webhook-sim: out of memory\n", stderr);
		abort();
	}
	return q;
}

char *
xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
	char	   *p = xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

void
sb_init(sbuf *sb)
{
	sb->data = NULL;
	sb->len = 0;
	sb->cap = 0;
}

void
sb_free(sbuf *sb)
{
	free(sb->data);
	sb_init(sb);
}

void
sb_reset(sbuf *sb)
{
	sb->len = 0;
	if (sb->data)
		sb->data[0] = '\0';
}

/* Make room for n more bytes plus the terminating NUL. */
static void
sb_grow(sbuf *sb, size_t n)
{
	size_t		need = sb->len + n + 1;

	if (need <= sb->cap)
		return;
	if (sb->cap == 0)
		sb->cap = 64;
	while (sb->cap < need)
		sb->cap *= 2;
	sb->data = xrealloc(sb->data, sb->cap);
}

void
sb_putn(sbuf *sb, const char *s, size_t n)
{
	sb_grow(sb, n);
	memcpy(sb->data + sb->len, s, n);
	sb->len += n;
	sb->data[sb->len] = '\0';
}

void
sb_puts(sbuf *sb, const char *s)
{
	sb_putn(sb, s, strlen(s));
}

void
sb_putc(sbuf *sb, char c)
{
	sb_putn(sb, &c, 1);
}

void
sb_printf(sbuf *sb, const char *fmt,...)
{
	va_list		ap;
	int			n;
	char		probe[1];

	va_start(ap, fmt);
	n = vsnprintf(probe, sizeof(probe), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sb_grow(sb, (size_t) n);
	va_start(ap, fmt);
	vsnprintf(sb->data + sb->len, (size_t) n + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t) n;
}

/*
 * Append s as a quoted JSON string.  Control characters, quotes and
 * backslashes are escaped; other bytes (UTF-8 included) pass through, so the
 * output is valid JSON whenever the input is valid UTF-8.
 */
void
sb_json_strn(sbuf *sb, const char *s, size_t n)
{
	size_t		i;

	sb_putc(sb, '"');
	for (i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) s[i];

		switch (c)
		{
			case '"':
				sb_puts(sb, "\\\"");
				break;
			case '\\':
				sb_puts(sb, "\\\\");
				break;
			case '\n':
				sb_puts(sb, "\\n");
				break;
			case '\r':
				sb_puts(sb, "\\r");
				break;
			case '\t':
				sb_puts(sb, "\\t");
				break;
			default:
				if (c < 0x20)
					sb_printf(sb, "\\u%04x", c);
				else
					sb_putc(sb, (char) c);
		}
	}
	sb_putc(sb, '"');
}

void
sb_json_str(sbuf *sb, const char *s)
{
	sb_json_strn(sb, s, strlen(s));
}

/* Hand the buffer's memory to the caller (never NULL); sb is emptied. */
char *
sb_steal(sbuf *sb)
{
	char	   *p;

	if (sb->data == NULL)
		sb_putn(sb, "", 0);
	p = sb->data;
	sb_init(sb);
	return p;
}

static uint64_t
splitmix64(uint64_t *x)
{
	uint64_t	z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void
rng_seed(sim_rng *r, uint64_t seed)
{
	int			i;

	for (i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static inline uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256** */
uint64_t
rng_next(sim_rng *r)
{
	uint64_t   *s = r->s;
	uint64_t	result = rotl(s[1] * 5, 7) * 9;
	uint64_t	t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* Uniform in [0, n); n == 0 gives 0.  Rejection keeps it unbiased. */
uint64_t
rng_below(sim_rng *r, uint64_t n)
{
	uint64_t	limit,
				x;

	if (n == 0)
		return 0;
	limit = UINT64_MAX - (UINT64_MAX % n);
	do
		x = rng_next(r);
	while (x >= limit);
	return x % n;
}

/* Uniform in [0, 1) with 53 bits. */
double
rng_double(sim_rng *r)
{
	return (double) (rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* n random base62 characters plus a NUL into out (n + 1 bytes). */
void
rng_token(sim_rng *r, char *out, int n)
{
	static const char alphabet[] =
	"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	int			i;

	for (i = 0; i < n; i++)
		out[i] = alphabet[rng_below(r, 62)];
	out[n] = '\0';
}

/* A version-4-shaped UUID (37 bytes with the NUL). */
void
rng_uuid(sim_rng *r, char *out)
{
	uint64_t	a = rng_next(r),
				b = rng_next(r);

	snprintf(out, 37, "%08x-%04x-4%03x-%04x-%012llx",
			 (unsigned) (a >> 32), (unsigned) ((a >> 16) & 0xffff),
			 (unsigned) (a & 0xfff), (unsigned) (0x8000 | ((b >> 48) & 0x3fff)),
			 (unsigned long long) (b & 0xffffffffffffULL));
}

/*
 * Format epoch seconds as ISO-8601 in UTC: "…T…Z" when zulu, else with the
 * "+00:00" offset Shopify uses.
 */
void
iso_time(int64_t epoch, int zulu, char *out, size_t outlen)
{
	time_t		t = (time_t) epoch;
	struct tm	tm;

	gmtime_r(&t, &tm);
	strftime(out, outlen, zulu ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%dT%H:%M:%S+00:00", &tm);
}

/*
 * Parse "YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]" (a space may replace the T; no
 * zone means UTC) or a bare integer of epoch seconds.  Fractions are
 * truncated.  Returns 0 on success, -1 on malformed input.
 */
int
parse_iso_time(const char *s, int64_t *out)
{
	struct tm	tm;
	int			y,
				mo,
				d,
				h,
				mi,
				se,
				n = 0;
	const char *p;
	int64_t		v;

	if (parse_int64(s, 0, INT64_MAX / 2, &v) == 0)
	{
		*out = v;
		return 0;
	}
	if (sscanf(s, "%4d-%2d-%2d%*1[T ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 || n == 0)
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return -1;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	v = (int64_t) timegm(&tm);
	p = s + n;
	if (*p == '.')
	{
		p++;
		while (isdigit((unsigned char) *p))
			p++;
	}
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-' || *p == ' ')
	{
		/* ' ' is a '+' that went through form decoding unescaped */
		int			oh,
					om,
					m = 0;

		if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &m) != 2 || m != 5)
			return -1;
		v += (*p == '-' ? 1 : -1) * (int64_t) (oh * 3600 + om * 60);
		p += 6;
	}
	if (*p != '\0')
		return -1;
	*out = v;
	return 0;
}

int64_t
now_epoch(void)
{
	return (int64_t) time(NULL);
}

double
now_monotonic(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* Strict decimal integer within [min, max]; 0 on success, -1 otherwise. */
int
parse_int64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char	   *end;
	long long	v;

	if (s == NULL || *s == '\0' || isspace((unsigned char) *s))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -1;
	*out = (int64_t) v;
	return 0;
}

/* A probability in [0, 1]; 0 on success, -1 otherwise. */
int
parse_share(const char *s, double *out)
{
	char	   *end;
	double		v;

	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !(v >= 0.0 && v <= 1.0))
		return -1;
	*out = v;
	return 0;
}

static void idmap_grow(id_map *mp);

/*
 * String-keyed map to long: open addressing with linear probing; the map
 * owns copies of its keys.  Iterate over keys[0..cap) skipping NULLs.
 */

static uint64_t
hash_str(const char *s)
{
	uint64_t	h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (unsigned char) *s++) * 1099511628211ULL;
	return h;
}

static void
idmap_grow(id_map *mp)
{
	id_map		old = *mp;
	size_t		i;

	mp->cap = old.cap ? old.cap * 2 : 64;
	mp->keys = xcalloc(mp->cap, sizeof(char *));
	mp->vals = xcalloc(mp->cap, sizeof(long));
	mp->n = 0;
	for (i = 0; i < old.cap; i++)
		if (old.keys[i])
		{
			idmap_put(mp, old.keys[i], old.vals[i]);
			free(old.keys[i]);
		}
	free(old.keys);
	free(old.vals);
}

void
idmap_put(id_map *mp, const char *key, long val)
{
	size_t		i;

	if ((mp->n + 1) * 2 > mp->cap)
		idmap_grow(mp);
	i = hash_str(key) & (mp->cap - 1);
	while (mp->keys[i] && strcmp(mp->keys[i], key) != 0)
		i = (i + 1) & (mp->cap - 1);
	if (mp->keys[i] == NULL)
	{
		mp->keys[i] = xstrdup(key);
		mp->n++;
	}
	mp->vals[i] = val;
}

long
idmap_get(const id_map *mp, const char *key)
{
	size_t		i;

	if (mp->cap == 0)
		return -1;
	i = hash_str(key) & (mp->cap - 1);
	while (mp->keys[i])
	{
		if (strcmp(mp->keys[i], key) == 0)
			return mp->vals[i];
		i = (i + 1) & (mp->cap - 1);
	}
	return -1;
}

void
idmap_free(id_map *mp)
{
	size_t		i;

	for (i = 0; i < mp->cap; i++)
		free(mp->keys[i]);
	free(mp->keys);
	free(mp->vals);
	memset(mp, 0, sizeof(*mp));
}

