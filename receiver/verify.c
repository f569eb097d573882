/*
 * verify.c
 *		Webhook signature schemes: a table of small functions, one per source
 *		kind, each checking one delivery over its exact raw bytes.
 *
 * Every scheme is HMAC-SHA256.  A scheme extracts the candidate signatures
 * (several during a provider-side rotation) and the bytes that were signed,
 * then match_any() tries every current secret against every candidate with
 * a constant-time comparison.  Timestamps are checked against the source's
 * tolerance in both directions: a stale or a future timestamp is refused
 * even when the MAC is valid, so a captured delivery cannot be replayed.
 *
 * Written from the providers' published specifications (see
 * docs/receiver.md); nothing here logs, allocates per request, or knows
 * about HTTP.
 *
 * Also here, because it is the same kind of pure reading of a verified
 * body: rcv_slack_challenge(), which recognises Slack's url_verification
 * handshake so that the receiver can echo its challenge.
 */
#include "verify.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "decode.h"

#define MAC_LEN			32		/* SHA-256 */
#define MAX_CANDIDATES	8		/* signatures considered per delivery */
#define MAX_SEGMENTS	32		/* pieces of signed bytes (hmac templates) */

/* One piece of the signed bytes; the MAC runs over their concatenation. */
typedef struct seg
{
	const void *p;
	size_t		n;
} seg;

/* Candidate signatures taken from the request, already decoded. */
typedef struct candidates
{
	unsigned char mac[MAX_CANDIDATES][MAC_LEN];
	int			n;
} candidates;

static EVP_MAC *hmac_impl;

/* An HMAC-SHA256 context keyed with key (len bytes), or NULL. */
static EVP_MAC_CTX *
hmac_keyed(const unsigned char *key, size_t len)
{
	EVP_MAC_CTX *ctx;
	OSSL_PARAM	params[2];
	static const unsigned char empty_key[1] = {0};

	if (hmac_impl == NULL)
	{
		hmac_impl = EVP_MAC_fetch(NULL, "HMAC", NULL);
		if (hmac_impl == NULL)
			return NULL;
	}
	ctx = EVP_MAC_CTX_new(hmac_impl);
	if (ctx == NULL)
		return NULL;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
												 (char *) "SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	/* OpenSSL refuses a NULL key; an empty key is legal HMAC, though */
	if (!EVP_MAC_init(ctx, len ? key : empty_key, len, params))
	{
		EVP_MAC_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

/*
 * hmac_sha256
 *		MAC of the concatenation of segs under key into out: a copy of the
 *		secret's keyed context (keying is the costly part), or a context
 *		keyed here if the secret has none.
 *
 * Returns 0 on success, -1 if OpenSSL fails (then nothing can match).
 */
static int
hmac_sha256(const rcv_secret *key, const seg *segs, int nsegs,
			unsigned char out[MAC_LEN])
{
	EVP_MAC_CTX *ctx;
	size_t		outlen = 0;
	int			rc = -1;

	ctx = key->mac ? EVP_MAC_CTX_dup(key->mac) : hmac_keyed(key->key, key->len);
	if (ctx == NULL)
		goto err;
	for (int i = 0; i < nsegs; i++)
		if (segs[i].n > 0 && !EVP_MAC_update(ctx, segs[i].p, segs[i].n))
			goto err;
	if (!EVP_MAC_final(ctx, out, &outlen, MAC_LEN) || outlen != MAC_LEN)
		goto err;
	rc = 0;
err:
	EVP_MAC_CTX_free(ctx);
	return rc;
}

/*
 * match_any
 *		True if some current secret signs segs into some candidate.
 *
 * Every comparison is CRYPTO_memcmp over the full MAC length, so timing
 * reveals nothing about how much of a forged signature was right.
 */
static int
match_any(const rcv_verifier *v, const seg *segs, int nsegs,
		  const candidates *c)
{
	unsigned char mac[MAC_LEN];
	int			found = 0;

	for (int s = 0; s < v->nsecrets; s++)
	{
		if (hmac_sha256(&v->secrets[s], segs, nsegs, mac) != 0)
			continue;
		for (int i = 0; i < c->n; i++)
			found |= (CRYPTO_memcmp(mac, c->mac[i], MAC_LEN) == 0);
	}
	OPENSSL_cleanse(mac, sizeof(mac));
	return found;
}

/* Add one encoded signature to c if it decodes to exactly one MAC. */
static void
add_candidate(candidates *c, const char *s, size_t len, rcv_encoding enc)
{
	size_t		outlen = 0;
	int			rc;

	if (c->n >= MAX_CANDIDATES)
		return;
	if (enc == RCV_ENC_HEX)
		rc = rcv_hex_decode(s, len, c->mac[c->n], MAC_LEN, &outlen);
	else
		rc = rcv_base64_decode(s, len, c->mac[c->n], MAC_LEN, &outlen);
	if (rc == 0 && outlen == MAC_LEN)
		c->n++;
}

/*
 * rcv_header_get
 *		First value of header name (case-insensitive), or NULL.
 */
const char *
rcv_header_get(const rcv_header *hdrs, int nhdrs, const char *name)
{
	for (int i = 0; i < nhdrs; i++)
		if (strcasecmp(hdrs[i].name, name) == 0)
			return hdrs[i].value;
	return NULL;
}

/* First of two alias headers present (Standard Webhooks and svix). */
static const char *
header_alias(const rcv_header *hdrs, int nhdrs, const char *a, const char *b)
{
	const char *v = rcv_header_get(hdrs, nhdrs, a);

	return v ? v : rcv_header_get(hdrs, nhdrs, b);
}

/* Skip optional whitespace around header list items. */
static void
trim(const char **s, size_t *len)
{
	while (*len > 0 && isspace((unsigned char) **s))
	{
		(*s)++;
		(*len)--;
	}
	while (*len > 0 && isspace((unsigned char) (*s)[*len - 1]))
		(*len)--;
}

/*
 * check_timestamp
 *		Parse a decimal Unix timestamp and compare it with now.
 *
 * Only digits are accepted (no sign, no fraction, at most 12 of them), so a
 * provider's value and ours are the same bytes that were signed.
 */
static rcv_verify_result
check_timestamp(const char *ts, size_t len, int tolerance, time_t now)
{
	long long	t = 0;

	if (len == 0 || len > 12)
		return RCV_MALFORMED_TIMESTAMP;
	for (size_t i = 0; i < len; i++)
	{
		if (ts[i] < '0' || ts[i] > '9')
			return RCV_MALFORMED_TIMESTAMP;
		t = t * 10 + (ts[i] - '0');
	}
	if (t < (long long) now - tolerance)
		return RCV_STALE_TIMESTAMP;
	if (t > (long long) now + tolerance)
		return RCV_FUTURE_TIMESTAMP;
	return RCV_OK;
}

/* ---------------------------------------------------------------------
 * The schemes
 * --------------------------------------------------------------------- */

/*
 * The shape Stripe's and Paddle's headers share: a list of key=value items
 * (sep between them) with one timestamp item and any number of signature
 * items, the signed bytes being "<timestamp><joiner><body>".
 */
typedef struct stamped_list
{
	char		sep;			/* between items */
	const char *ts_key;			/* the timestamp item's "key=" */
	const char *sig_key;		/* a signature item's "key=" (hex) */
	const char *joiner;			/* between timestamp and body */
} stamped_list;

/*
 * Verifies header h (NULL: missing) of the stamped_list form f: a repeated
 * timestamp item or no signature item is malformed; the timestamp must be
 * within the tolerance; any signature item may match.
 */
static rcv_verify_result
verify_stamped_list(const rcv_verifier *v, const stamped_list *f, const char *h,
					const unsigned char *body, size_t len, time_t now)
{
	const char *ts = NULL;
	size_t		tslen = 0;
	size_t		tklen = strlen(f->ts_key);
	size_t		sklen = strlen(f->sig_key);
	char		seps[2] = {f->sep, '\0'};
	candidates	c = {.n = 0};
	rcv_verify_result r;
	seg			segs[3];

	if (h == NULL)
		return RCV_MISSING_SIGNATURE;
	for (const char *p = h; *p;)
	{
		const char *item = p;
		size_t		ilen = strcspn(p, seps);

		p += ilen + (p[ilen] == f->sep);
		trim(&item, &ilen);
		if (ilen > tklen && strncmp(item, f->ts_key, tklen) == 0)
		{
			if (ts != NULL)
				return RCV_MALFORMED_SIGNATURE;
			ts = item + tklen;
			tslen = ilen - tklen;
		}
		else if (ilen > sklen && strncmp(item, f->sig_key, sklen) == 0)
			add_candidate(&c, item + sklen, ilen - sklen, RCV_ENC_HEX);
	}
	if (ts == NULL || c.n == 0)
		return RCV_MALFORMED_SIGNATURE;
	if ((r = check_timestamp(ts, tslen, v->tolerance, now)) != RCV_OK)
		return r;
	segs[0] = (seg) {ts, tslen};
	segs[1] = (seg) {f->joiner, strlen(f->joiner)};
	segs[2] = (seg) {body, len};
	return match_any(v, segs, 3, &c) ? RCV_OK : RCV_BAD_SIGNATURE;
}

/*
 * Stripe: "Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…][,v0=…]";
 * signed bytes "<t>.<body>"; secret used verbatim.
 */
static rcv_verify_result
verify_stripe(const rcv_verifier *v, const rcv_header *hdrs, int nhdrs,
			  const unsigned char *body, size_t len, time_t now)
{
	static const stamped_list form = {',', "t=", "v1=", "."};

	return verify_stamped_list(v, &form, rcv_header_get(hdrs, nhdrs, "stripe-signature"),
							   body, len, now);
}

/*
 * Standard Webhooks (and svix, its origin): webhook-id, webhook-timestamp,
 * "webhook-signature: v1,<base64> v1,<base64>"; signed bytes
 * "<id>.<timestamp>.<body>"; secret "whsec_" + base64 of the key.
 */
static rcv_verify_result
verify_standard(const rcv_verifier *v, const rcv_header *hdrs, int nhdrs,
				const unsigned char *body, size_t len, time_t now)
{
	const char *id = header_alias(hdrs, nhdrs, "webhook-id", "svix-id");
	const char *ts = header_alias(hdrs, nhdrs, "webhook-timestamp", "svix-timestamp");
	const char *sig = header_alias(hdrs, nhdrs, "webhook-signature", "svix-signature");
	candidates	c = {.n = 0};
	rcv_verify_result r;
	seg			segs[5];

	if (sig == NULL)
		return RCV_MISSING_SIGNATURE;
	if (ts == NULL)
		return RCV_MISSING_TIMESTAMP;
	if (id == NULL || *id == '\0')
		return RCV_MISSING_ID;
	for (const char *p = sig; *p;)
	{
		const char *item;
		size_t		ilen;

		p += strspn(p, " ");
		item = p;
		ilen = strcspn(p, " ");
		p += ilen;
		/* other versions (v1a is asymmetric) are not ours to check */
		if (ilen > 3 && strncmp(item, "v1,", 3) == 0)
			add_candidate(&c, item + 3, ilen - 3, RCV_ENC_BASE64);
	}
	if (c.n == 0)
		return RCV_MALFORMED_SIGNATURE;
	if ((r = check_timestamp(ts, strlen(ts), v->tolerance, now)) != RCV_OK)
		return r;
	segs[0] = (seg) {id, strlen(id)};
	segs[1] = (seg) {".", 1};
	segs[2] = (seg) {ts, strlen(ts)};
	segs[3] = (seg) {".", 1};
	segs[4] = (seg) {body, len};
	return match_any(v, segs, 5, &c) ? RCV_OK : RCV_BAD_SIGNATURE;
}

/*
 * A header holding one signature after a fixed prefix ("sha256=<hex>", a
 * bare base64 …): h NULL is a missing signature; without the prefix, or
 * not decodable in enc, it is malformed.  On RCV_OK c holds the candidate.
 */
static rcv_verify_result
prefixed_signature(const char *h, const char *prefix, rcv_encoding enc, candidates *c)
{
	size_t		plen = strlen(prefix);
	size_t		hlen;

	if (h == NULL)
		return RCV_MISSING_SIGNATURE;
	hlen = strlen(h);
	trim(&h, &hlen);
	if (hlen < plen || strncmp(h, prefix, plen) != 0)
		return RCV_MALFORMED_SIGNATURE;
	add_candidate(c, h + plen, hlen - plen, enc);
	return c->n == 0 ? RCV_MALFORMED_SIGNATURE : RCV_OK;
}

/*
 * The body-only schemes differ only in header, prefix and encoding, which
 * their rows of the table below give: Shopify (base64), GitHub ("sha256="
 * hex), Razorpay (hex), Checkout.com (hex).  None carries a signed
 * timestamp; the inbox dedupes replays.
 */
static rcv_verify_result
verify_body_only(const rcv_verifier *v, const rcv_header *hdrs, int nhdrs,
				 const unsigned char *body, size_t len, time_t now)
{
	candidates	c = {.n = 0};
	seg			segs[1];
	rcv_verify_result r = prefixed_signature(rcv_header_get(hdrs, nhdrs, v->scheme->sig_header),
											 v->scheme->sig_prefix, v->scheme->sig_encoding, &c);

	(void) now;
	if (r != RCV_OK)
		return r;
	segs[0] = (seg) {body, len};
	return match_any(v, segs, 1, &c) ? RCV_OK : RCV_BAD_SIGNATURE;
}

/*
 * Slack: "X-Slack-Signature: v0=<hex>", X-Slack-Request-Timestamp;
 * signed bytes "v0:<timestamp>:<body>".
 */
static rcv_verify_result
verify_slack(const rcv_verifier *v, const rcv_header *hdrs, int nhdrs,
			 const unsigned char *body, size_t len, time_t now)
{
	const char *sig = rcv_header_get(hdrs, nhdrs, "x-slack-signature");
	const char *ts = rcv_header_get(hdrs, nhdrs, "x-slack-request-timestamp");
	candidates	c = {.n = 0};
	rcv_verify_result r;
	seg			segs[4];

	if (sig == NULL)
		return RCV_MISSING_SIGNATURE;
	if (ts == NULL)
		return RCV_MISSING_TIMESTAMP;
	if (strncmp(sig, "v0=", 3) != 0)
		return RCV_MALFORMED_SIGNATURE;
	add_candidate(&c, sig + 3, strlen(sig + 3), RCV_ENC_HEX);
	if (c.n == 0)
		return RCV_MALFORMED_SIGNATURE;
	if ((r = check_timestamp(ts, strlen(ts), v->tolerance, now)) != RCV_OK)
		return r;
	segs[0] = (seg) {"v0:", 3};
	segs[1] = (seg) {ts, strlen(ts)};
	segs[2] = (seg) {":", 1};
	segs[3] = (seg) {body, len};
	return match_any(v, segs, 4, &c) ? RCV_OK : RCV_BAD_SIGNATURE;
}

/*
 * Paddle Billing: "Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>]";
 * signed bytes "<ts>:<body>".
 */
static rcv_verify_result
verify_paddle(const rcv_verifier *v, const rcv_header *hdrs, int nhdrs,
			  const unsigned char *body, size_t len, time_t now)
{
	static const stamped_list form = {';', "ts=", "h1=", ":"};

	return verify_stamped_list(v, &form, rcv_header_get(hdrs, nhdrs, "paddle-signature"),
							   body, len, now);
}

/*
 * hmac_template_segments
 *		Split the signed-bytes template into segments, substituting
 *		{timestamp}, {body} and {id}.  ts/id may be NULL when unused.
 *
 * Returns the number of segments, or -1 for an unknown placeholder, a
 * placeholder without its header, or too many pieces.
 */
static int
hmac_template_segments(const char *tpl, const char *ts, const char *id,
					   const unsigned char *body, size_t len,
					   seg *segs, int maxsegs)
{
	int			n = 0;
	const char *p = tpl;

	while (*p)
	{
		const char *open = strchr(p, '{');
		const char *lit_end = open ? open : p + strlen(p);

		if (lit_end > p)
		{
			if (n >= maxsegs)
				return -1;
			segs[n++] = (seg) {p, (size_t) (lit_end - p)};
		}
		if (open == NULL)
			break;
		if (n >= maxsegs)
			return -1;
		if (strncmp(open, "{body}", 6) == 0)
		{
			segs[n++] = (seg) {body, len};
			p = open + 6;
		}
		else if (strncmp(open, "{timestamp}", 11) == 0 && ts != NULL)
		{
			segs[n++] = (seg) {ts, strlen(ts)};
			p = open + 11;
		}
		else if (strncmp(open, "{id}", 4) == 0 && id != NULL)
		{
			segs[n++] = (seg) {id, strlen(id)};
			p = open + 4;
		}
		else
			return -1;
	}
	return n;
}

/* The template in effect: explicit, or the documented default. */
static const char *
hmac_template(const rcv_verifier *v)
{
	if (v->hmac_template && *v->hmac_template)
		return v->hmac_template;
	return v->hmac_ts_header ? "{timestamp}.{body}" : "{body}";
}

/*
 * hmac: the configurable scheme for providers not listed (settings keys
 * header, prefix, encoding, timestamp_header, template, id_header).
 */
static rcv_verify_result
verify_hmac(const rcv_verifier *v, const rcv_header *hdrs, int nhdrs,
			const unsigned char *body, size_t len, time_t now)
{
	const char *ts = NULL;
	const char *id = NULL;
	candidates	c = {.n = 0};
	seg			segs[MAX_SEGMENTS];
	int			nsegs;
	rcv_verify_result r = prefixed_signature(rcv_header_get(hdrs, nhdrs, v->hmac_header),
											 v->hmac_prefix ? v->hmac_prefix : "",
											 v->hmac_encoding, &c);

	if (r != RCV_OK)
		return r;
	if (v->hmac_ts_header)
	{
		ts = rcv_header_get(hdrs, nhdrs, v->hmac_ts_header);
		if (ts == NULL)
			return RCV_MISSING_TIMESTAMP;
		if ((r = check_timestamp(ts, strlen(ts), v->tolerance, now)) != RCV_OK)
			return r;
	}
	if (v->hmac_id_header)
	{
		id = rcv_header_get(hdrs, nhdrs, v->hmac_id_header);
		if (id == NULL)
			return RCV_MISSING_ID;
	}
	nsegs = hmac_template_segments(hmac_template(v), ts, id, body, len,
								   segs, MAX_SEGMENTS);
	if (nsegs < 0)
		return RCV_MISSING_ID;	/* rcv_verifier_check refuses such configs */
	return match_any(v, segs, nsegs, &c) ? RCV_OK : RCV_BAD_SIGNATURE;
}

/* ---------------------------------------------------------------------
 * Secrets
 * --------------------------------------------------------------------- */

/* Most providers: the secret string's bytes are the key. */
static int
secret_verbatim(const char *secret, rcv_secret *out)
{
	out->len = strlen(secret);
	out->key = malloc(out->len + 1);
	if (out->key == NULL)
		return -1;
	memcpy(out->key, secret, out->len + 1);
	out->mac = hmac_keyed(out->key, out->len);
	return 0;
}

/* Standard Webhooks: "whsec_" (optional) + base64 of the key bytes. */
static int
secret_whsec(const char *secret, rcv_secret *out)
{
	size_t		slen;

	if (strncmp(secret, "whsec_", 6) == 0)
		secret += 6;
	slen = strlen(secret);
	out->key = malloc(slen + 1);
	if (out->key == NULL)
		return -1;
	if (rcv_base64_decode(secret, slen, out->key, slen + 1, &out->len) != 0)
	{
		free(out->key);
		out->key = NULL;
		return -1;
	}
	out->mac = hmac_keyed(out->key, out->len);
	return 0;
}

void
rcv_secret_free(rcv_secret *s)
{
	if (s->key)
		OPENSSL_cleanse(s->key, s->len);
	free(s->key);
	EVP_MAC_CTX_free(s->mac);
	s->key = NULL;
	s->mac = NULL;
}

/*
 * The table: one row per kind of include/webhook_inbox_kinds.h (sources.kind),
 * indexed by it.
 */
#define SCHEME(name, verify, secret) [WI_KIND_##name] = {WI_KIND_##name, verify, secret, NULL, NULL, 0}
#define BODY_SCHEME(name, header, prefix, enc) \
	[WI_KIND_##name] = {WI_KIND_##name, verify_body_only, secret_verbatim, header, prefix, enc}
static const rcv_scheme schemes[] = {
	SCHEME(stripe, verify_stripe, secret_verbatim),
	SCHEME(standard, verify_standard, secret_whsec),
	BODY_SCHEME(shopify, "x-shopify-hmac-sha256", "", RCV_ENC_BASE64),
	BODY_SCHEME(github, "x-hub-signature-256", "sha256=", RCV_ENC_HEX),
	BODY_SCHEME(razorpay, "x-razorpay-signature", "", RCV_ENC_HEX),
	SCHEME(slack, verify_slack, secret_verbatim),
	SCHEME(paddle, verify_paddle, secret_verbatim),
	BODY_SCHEME(checkout, "cko-signature", "", RCV_ENC_HEX),
	SCHEME(hmac, verify_hmac, secret_verbatim),
};
#undef SCHEME
#undef BODY_SCHEME

_Static_assert(sizeof(schemes) / sizeof(schemes[0]) == WI_NUM_SOURCE_KINDS,
			   "schemes needs one row per kind of webhook_inbox_kinds.h");

/*
 * The scheme of the kind called kind, or NULL for a name that is no kind (or
 * a kind whose row is missing, which test-verify catches).
 */
const rcv_scheme *
rcv_scheme_lookup(const char *kind)
{
	int			k = wi_source_kind_lookup(kind);

	if (k < 0 || schemes[k].verify == NULL || (int) schemes[k].kind != k)
		return NULL;
	return &schemes[k];
}

/*
 * rcv_verify
 *		Check one delivery against its source.  Pure function of its inputs.
 */
rcv_verify_result
rcv_verify(const rcv_verifier *v, const rcv_header *hdrs, int nhdrs,
		   const unsigned char *body, size_t len, time_t now)
{
	return v->scheme->verify(v, hdrs, nhdrs, body, len, now);
}

/*
 * rcv_verifier_check
 *		Refuse a configuration that could never verify anything, so that the
 *		source is reported at load time rather than failing every request.
 *
 * Returns 0, or -1 with *problem naming what is wrong (never a secret).
 */
int
rcv_verifier_check(const rcv_verifier *v, const char **problem)
{
	seg			segs[MAX_SEGMENTS];
	static const unsigned char nothing[1] = {0};

	if (v->scheme == NULL)
	{
		*problem = "unknown kind";
		return -1;
	}
	if (v->nsecrets == 0)
	{
		*problem = "no usable signing secret";
		return -1;
	}
	if (v->scheme->verify != verify_hmac)
		return 0;
	if (v->hmac_header == NULL || *v->hmac_header == '\0')
	{
		*problem = "settings.header is required";
		return -1;
	}
	/* a dry run of the template with every placeholder it may use */
	if (hmac_template_segments(hmac_template(v),
							   v->hmac_ts_header ? "0" : NULL,
							   v->hmac_id_header ? "x" : NULL,
							   nothing, 0, segs, MAX_SEGMENTS) < 0)
	{
		*problem = "settings.template uses a placeholder without its header, or an unknown one";
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * Slack's url_verification handshake
 * --------------------------------------------------------------------- */

/* Skip JSON whitespace from p; returns the first other position. */
static const unsigned char *
json_ws(const unsigned char *p, const unsigned char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/*
 * json_string
 *		p points at a '"': returns the position after the closing quote of a
 *		valid JSON string (escapes checked, no raw control characters), or
 *		NULL.  Bytes of 0x80 and up are taken as they are.
 */
static const unsigned char *
json_string(const unsigned char *p, const unsigned char *end)
{
	if (p >= end || *p != '"')
		return NULL;
	for (p++; p < end; p++)
	{
		if (*p == '"')
			return p + 1;
		if (*p < 0x20)
			return NULL;
		if (*p != '\\')
			continue;
		if (++p >= end)
			return NULL;
		if (*p == 'u')
		{
			if (end - p < 5)
				return NULL;
			for (int i = 1; i <= 4; i++)
				if (!isxdigit(p[i]))
					return NULL;
			p += 4;
		}
		else if (strchr("\"\\/bfnrt", *p) == NULL || *p == '\0')
			return NULL;
	}
	return NULL;
}

/*
 * json_skip
 *		Skip one JSON value of any type starting at p (strings exactly;
 *		objects and arrays by their brackets, with the strings inside
 *		skipped exactly; numbers and literals up to the next delimiter).
 *		Returns the position after it, or NULL when it is not well formed
 *		enough to be skipped.  Nesting is bounded by depth.
 */
static const unsigned char *
json_skip(const unsigned char *p, const unsigned char *end, int depth)
{
	if (p >= end)
		return NULL;
	if (*p == '"')
		return json_string(p, end);
	if (*p == '{' || *p == '[')
	{
		unsigned char close = *p == '{' ? '}' : ']';

		if (depth > 64)
			return NULL;
		p = json_ws(p + 1, end);
		if (p < end && *p == close)
			return p + 1;
		for (;;)
		{
			if (close == '}')
			{
				if ((p = json_string(p, end)) == NULL)
					return NULL;
				p = json_ws(p, end);
				if (p >= end || *p != ':')
					return NULL;
				p = json_ws(p + 1, end);
			}
			if ((p = json_skip(p, end, depth + 1)) == NULL)
				return NULL;
			p = json_ws(p, end);
			if (p >= end)
				return NULL;
			if (*p == close)
				return p + 1;
			if (*p != ',')
				return NULL;
			p = json_ws(p + 1, end);
		}
	}
	/* a number, true, false or null: its characters up to a delimiter */
	{
		const unsigned char *start = p;

		while (p < end && (isalnum(*p) || *p == '-' || *p == '+' || *p == '.'))
			p++;
		return p > start ? p : NULL;
	}
}

/*
 * rcv_slack_challenge
 *		Whether body (len bytes, already verified as the source's) is Slack's
 *		url_verification request: a JSON object whose top-level "type" is
 *		the string "url_verification" and whose "challenge" is a non-empty
 *		string.  If so, returns 1 and sets *challenge and *challenge_len to
 *		the challenge's JSON token, quotes and escapes included, inside body
 *		(valid JSON, so it can be echoed as {"challenge":<token>}); else 0.
 *		Anything else, malformed JSON included, is an ordinary delivery.
 */
int
rcv_slack_challenge(const unsigned char *body, size_t len,
					const unsigned char **challenge, size_t *challenge_len)
{
	const unsigned char *end = body + len;
	const unsigned char *p = json_ws(body, end);
	const unsigned char *chal = NULL;
	size_t		chal_len = 0;
	int			is_handshake = 0;
	static const char type_value[] = "\"url_verification\"";

	if (p >= end || *p != '{')
		return 0;
	p = json_ws(p + 1, end);
	if (p < end && *p == '}')
		return 0;
	for (;;)
	{
		const unsigned char *key = p;
		const unsigned char *value;
		size_t		key_len;

		if ((p = json_string(p, end)) == NULL)
			return 0;
		key_len = (size_t) (p - key);
		p = json_ws(p, end);
		if (p >= end || *p != ':')
			return 0;
		value = p = json_ws(p + 1, end);
		if ((p = json_skip(p, end, 0)) == NULL)
			return 0;
		if (key_len == 6 && memcmp(key, "\"type\"", 6) == 0)
			is_handshake = (size_t) (p - value) == sizeof(type_value) - 1 &&
				memcmp(value, type_value, sizeof(type_value) - 1) == 0;
		else if (key_len == 11 && memcmp(key, "\"challenge\"", 11) == 0)
		{
			/* a string of at least one character, or no challenge */
			chal = *value == '"' && p - value > 2 ? value : NULL;
			chal_len = chal ? (size_t) (p - value) : 0;
		}
		p = json_ws(p, end);
		if (p >= end)
			return 0;
		if (*p == '}')
			break;
		if (*p != ',')
			return 0;
		p = json_ws(p + 1, end);
	}
	/* nothing but whitespace may follow the object */
	if (json_ws(p + 1, end) != end || !is_handshake || chal == NULL)
		return 0;
	*challenge = chal;
	*challenge_len = chal_len;
	return 1;
}

static const char *const reasons[RCV_NUM_RESULTS] = {
	[RCV_OK] = "ok",
	[RCV_MISSING_SIGNATURE] = "missing_signature",
	[RCV_MALFORMED_SIGNATURE] = "malformed_signature",
	[RCV_BAD_SIGNATURE] = "bad_signature",
	[RCV_MISSING_TIMESTAMP] = "missing_timestamp",
	[RCV_MALFORMED_TIMESTAMP] = "malformed_timestamp",
	[RCV_STALE_TIMESTAMP] = "stale_timestamp",
	[RCV_FUTURE_TIMESTAMP] = "future_timestamp",
	[RCV_MISSING_ID] = "missing_id",
};

/* The metric label and log word for a result. */
const char *
rcv_verify_reason(rcv_verify_result r)
{
	if ((int) r < 0 || r >= RCV_NUM_RESULTS)
		return "unknown";
	return reasons[r];
}
