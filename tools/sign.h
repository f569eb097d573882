/*
 * sign.h
 *		Delivery sources and their signing schemes.
 *
 * A source is a receiver endpoint (/hooks/<name>) with one secret and one
 * scheme.  Each scheme is a row in a table of small functions: it adds the
 * scheme's signature headers, computed at send time over the exact body.
 * The schemes are the source kinds of include/webhook_inbox_kinds.h, every
 * one of them (the table is made from that list); each is also a command
 * line option, --KIND NAME:SECRET, of serve and replay.
 */
#ifndef SIM_SIGN_H
#define SIM_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "webhook_inbox_kinds.h"

#define HDR_MAX 16

typedef WiSourceKind sign_kind;

/*
 * getopt_long rows "--KIND NAME:SECRET", one per kind, and the option value
 * each returns (SIM_OPT_KIND + the kind), above every single-character and
 * small-number option of the commands.
 */
#define SIM_OPT_KIND 256
#define SIM_KIND_OPTION_(name, ts) {#name, required_argument, NULL, SIM_OPT_KIND + WI_KIND_##name},
#define SIM_KIND_OPTIONS WI_SOURCE_KINDS(SIM_KIND_OPTION_)
/* " stripe standard …": the kinds, for --help */
#define SIM_KIND_HELP_(name, ts) " " #name

typedef struct sim_header
{
	char	   *name;
	char	   *value;
} sim_header;

typedef struct hdr_list
{
	int			n;
	sim_header	h[HDR_MAX];
} hdr_list;

typedef struct sim_source
{
	sign_kind	kind;
	char	   *name;			/* URL path segment of the receiver */
	char	   *secret;			/* never logged */
	unsigned char *key;			/* HMAC key bytes (decoded for standard) */
	size_t		keylen;
} sim_source;

/* The kind's name ("stripe", "shopify" …), as sources.kind spells it. */
extern const char *sign_kind_name(sign_kind k);

/*
 * Parse "NAME:SECRET" into src for the given kind.  Returns 0, or -1 with a
 * one-line reason in err (never containing the secret).
 */
extern int	source_parse(sign_kind kind, const char *arg, sim_source *src,
						 char *err, size_t errlen);
extern void source_free(sim_source *src);

/*
 * Parse "NAME:SECRET" of the given kind into sources[*nsources] and count it,
 * refusing a kind given twice and a name already taken.  Returns 0, or -1
 * with a one-line reason in err (the array is then as it was).
 */
extern int	source_add(sim_source *sources, int *nsources, sign_kind kind,
					   const char *arg, char *err, size_t errlen);

/*
 * Add the signature headers of src's scheme for body to out, using now as
 * the signing time.  The standard scheme reads "webhook-id" from out (it
 * must already be there).  The hmac kind signs as a source configured with
 * settings {"header": "X-Webhook-Signature"} verifies: hex, over the body.  Returns 0, or -1 if out is full or a required
 * header is missing.
 */
extern int	sign_headers(const sim_source *src, const char *body, size_t len,
						 int64_t now, hdr_list *out);

extern void hdr_add(hdr_list *l, const char *name, const char *value);
extern const char *hdr_get(const hdr_list *l, const char *name);
extern void hdr_copy(hdr_list *dst, const hdr_list *src);
extern void hdr_free(hdr_list *l);

/* Encoding helpers; out must hold 2*n+1 (hex) or 4*((n+2)/3)+1 (base64). */
extern void hex_encode(const unsigned char *in, size_t n, char *out);
extern void base64_encode(const unsigned char *in, size_t n, char *out);

/* Decode base64; returns decoded length or -1.  out holds 3*(len/4)+3. */
extern int	base64_decode(const char *in, size_t len, unsigned char *out);

#endif							/* SIM_SIGN_H */
