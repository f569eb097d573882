/*
 * util.h
 *		Small shared helpers for webhook-sim: growable string buffers with a
 *		JSON string writer, a seeded PRNG, time formatting and parsing, and an
 *		allocation wrapper.
 *
 * The PRNG is xoshiro256** seeded through splitmix64 so that one --seed gives
 * one scenario on every platform.  Allocation failure aborts the process: the
 * simulator is a test tool and has no sensible way to continue without memory.
 */
#ifndef SIM_UTIL_H
#define SIM_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Synthetic epoch of every scenario: 2026-01-01T00:00:00Z. */
#define SIM_EPOCH 1767225600LL

typedef struct sbuf
{
	char	   *data;			/* always NUL-terminated once used */
	size_t		len;
	size_t		cap;
} sbuf;

typedef struct sim_rng
{
	uint64_t	s[4];
} sim_rng;

typedef struct id_map
{
	char	  **keys;
	long	   *vals;
	size_t		cap;
	size_t		n;
} id_map;

extern void idmap_put(id_map *mp, const char *key, long val);
extern long idmap_get(const id_map *mp, const char *key);	/* -1 if absent */
extern void idmap_free(id_map *mp);

extern void *xmalloc(size_t n);
extern void *xcalloc(size_t n, size_t size);
extern void *xrealloc(void *p, size_t n);
extern char *xstrdup(const char *s);
extern char *xstrndup(const char *s, size_t n);

extern void sb_init(sbuf *sb);
extern void sb_free(sbuf *sb);
extern void sb_reset(sbuf *sb);
extern void sb_putn(sbuf *sb, const char *s, size_t n);
extern void sb_puts(sbuf *sb, const char *s);
extern void sb_putc(sbuf *sb, char c);
extern void sb_printf(sbuf *sb, const char *fmt,...) __attribute__((format(printf, 2, 3)));
extern void sb_json_strn(sbuf *sb, const char *s, size_t n);
extern void sb_json_str(sbuf *sb, const char *s);
extern char *sb_steal(sbuf *sb);

extern void rng_seed(sim_rng *r, uint64_t seed);
extern uint64_t rng_next(sim_rng *r);
extern uint64_t rng_below(sim_rng *r, uint64_t n);
extern double rng_double(sim_rng *r);
extern void rng_token(sim_rng *r, char *out, int n);
extern void rng_uuid(sim_rng *r, char *out);

extern void iso_time(int64_t epoch, int zulu, char *out, size_t outlen);
extern int	parse_iso_time(const char *s, int64_t *out);
extern int64_t now_epoch(void);
extern double now_monotonic(void);

extern int	parse_int64(const char *s, int64_t min, int64_t max, int64_t *out);
extern int	parse_share(const char *s, double *out);

#endif							/* SIM_UTIL_H */
