/*
 * sign.c
 *		Signing schemes of the simulated providers (see sign.h).
 *
 * Stripe:   Stripe-Signature: t=<now>,v1=<hex HMAC-SHA256(secret, "t.body")>,
 *           the whsec_ secret used verbatim as the key.
 * Shopify:  X-Shopify-Hmac-Sha256: base64 HMAC-SHA256(secret, body).
 * Standard: webhook-timestamp: <now>, webhook-signature: v1,<base64
 *           HMAC-SHA256(base64decode(secret minus "whsec_"), "id.ts.body")>.
 * GitHub:   X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>.
 * Razorpay: X-Razorpay-Signature: hex HMAC-SHA256(secret, body).
 * Slack:    X-Slack-Request-Timestamp: <now>, X-Slack-Signature:
 *           v0=<hex HMAC-SHA256(secret, "v0:ts:body")>.
 * Paddle:   Paddle-Signature: ts=<now>;h1=<hex HMAC-SHA256(secret, "ts:body")>.
 * Checkout: Cko-Signature: hex HMAC-SHA256(secret, body).
 * hmac:     X-Webhook-Signature: hex HMAC-SHA256(secret, body), what an hmac
 *           source with settings {"header": "X-Webhook-Signature"} checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "sign.h"
#include "util.h"

typedef int (*sign_fn) (const sim_source *src, const char *body, size_t len,
						int64_t now, hdr_list *out);

typedef struct sign_scheme
{
	sign_fn		sign;
} sign_scheme;

/* sign_stripe(), sign_standard() …: one per kind */
#define SIGN_DECL_(name, ts) \
	static int sign_##name(const sim_source *src, const char *body, size_t len, \
						   int64_t now, hdr_list *out);
WI_SOURCE_KINDS(SIGN_DECL_)
#undef SIGN_DECL_

/*
 * One row per kind of include/webhook_inbox_kinds.h, indexed by it and made
 * from it: a kind added there without its sign_<kind>() here does not compile.
 */
#define SCHEME_(name, ts) [WI_KIND_##name] = {sign_##name},
static const sign_scheme schemes[] = {
	WI_SOURCE_KINDS(SCHEME_)
};
#undef SCHEME_

const char *
sign_kind_name(sign_kind k)
{
	return wi_source_kind_name(k);
}

void
hex_encode(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t		i;

	for (i = 0; i < n; i++)
	{
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

void
base64_encode(const unsigned char *in, size_t n, char *out)
{
	EVP_EncodeBlock((unsigned char *) out, in, (int) n);
}

int
base64_decode(const char *in, size_t len, unsigned char *out)
{
	int			n,
				pad = 0;

	if (len == 0)
		return 0;
	if (len % 4 != 0)
		return -1;
	if (in[len - 1] == '=')
		pad++;
	if (len > 1 && in[len - 2] == '=')
		pad++;
	n = EVP_DecodeBlock(out, (const unsigned char *) in, (int) len);
	if (n < 0)
		return -1;
	return n - pad;
}

int
source_parse(sign_kind kind, const char *arg, sim_source *src,
			 char *err, size_t errlen)
{
	const char *colon = strchr(arg, ':');
	size_t		i;

	memset(src, 0, sizeof(*src));
	if (colon == NULL || colon == arg || colon[1] == '\0')
	{
		snprintf(err, errlen, "--%s expects NAME:SECRET", sign_kind_name(kind));
		return -1;
	}
	for (i = 0; arg + i < colon; i++)
	{
		char		c = arg[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
		{
			snprintf(err, errlen, "--%s: source name may only contain letters, digits, '-', '_' and '.'",
					 sign_kind_name(kind));
			return -1;
		}
	}
	src->kind = kind;
	src->name = xstrndup(arg, (size_t) (colon - arg));
	src->secret = xstrdup(colon + 1);
	if (kind == WI_KIND_standard)
	{
		const char *b64 = src->secret;
		int			n;

		if (strncmp(b64, "whsec_", 6) == 0)
			b64 += 6;
		src->key = xmalloc(strlen(b64) + 4);
		n = base64_decode(b64, strlen(b64), src->key);
		if (n <= 0)
		{
			snprintf(err, errlen, "--standard: secret must be whsec_ followed by base64");
			source_free(src);
			return -1;
		}
		src->keylen = (size_t) n;
	}
	else
	{
		src->keylen = strlen(src->secret);
		src->key = (unsigned char *) xstrdup(src->secret);
	}
	return 0;
}

int
source_add(sim_source *sources, int *nsources, sign_kind kind, const char *arg,
		   char *err, size_t errlen)
{
	int			i;

	for (i = 0; i < *nsources; i++)
		if (sources[i].kind == kind)
		{
			snprintf(err, errlen, "--%s given twice", sign_kind_name(kind));
			return -1;
		}
	if (source_parse(kind, arg, &sources[*nsources], err, errlen) != 0)
		return -1;
	for (i = 0; i < *nsources; i++)
		if (strcmp(sources[i].name, sources[*nsources].name) == 0)
		{
			snprintf(err, errlen, "two sources named \"%s\"", sources[i].name);
			source_free(&sources[*nsources]);
			return -1;
		}
	(*nsources)++;
	return 0;
}

void
source_free(sim_source *src)
{
	free(src->name);
	if (src->secret)
		memset(src->secret, 0, strlen(src->secret));
	free(src->secret);
	if (src->key)
		memset(src->key, 0, src->keylen);
	free(src->key);
	memset(src, 0, sizeof(*src));
}

void
hdr_add(hdr_list *l, const char *name, const char *value)
{
	if (l->n >= HDR_MAX)
		return;
	l->h[l->n].name = xstrdup(name);
	l->h[l->n].value = xstrdup(value);
	l->n++;
}

const char *
hdr_get(const hdr_list *l, const char *name)
{
	int			i;

	for (i = 0; i < l->n; i++)
		if (strcasecmp(l->h[i].name, name) == 0)
			return l->h[i].value;
	return NULL;
}

void
hdr_copy(hdr_list *dst, const hdr_list *src)
{
	int			i;

	dst->n = 0;
	for (i = 0; i < src->n; i++)
		hdr_add(dst, src->h[i].name, src->h[i].value);
}

void
hdr_free(hdr_list *l)
{
	int			i;

	for (i = 0; i < l->n; i++)
	{
		free(l->h[i].name);
		free(l->h[i].value);
	}
	l->n = 0;
}

/* HMAC-SHA256 over the concatenation of prefix and body. */
static void
hmac_sha256(const sim_source *src, const char *prefix, const char *body,
			size_t len, unsigned char *mac)
{
	size_t		plen = strlen(prefix);
	unsigned char *msg = xmalloc(plen + len);
	unsigned int maclen = 32;

	memcpy(msg, prefix, plen);
	memcpy(msg + plen, body, len);
	HMAC(EVP_sha256(), src->key, (int) src->keylen, msg, plen + len, mac, &maclen);
	free(msg);
}

/* The same, hex-encoded into hex[65]. */
static void
hmac_sha256_hex(const sim_source *src, const char *prefix, const char *body,
				size_t len, char *hex)
{
	unsigned char mac[32];

	hmac_sha256(src, prefix, body, len, mac);
	hex_encode(mac, 32, hex);
}

/*
 * Schemes that sign "<now><sep><body>" and send now and the hex HMAC in one
 * header, formatted by value_fmt ("%lld" then "%s").
 */
static int
sign_ts_hex(const sim_source *src, const char *body, size_t len, int64_t now,
			char sep, const char *header, const char *value_fmt, hdr_list *out)
{
	char		prefix[32],
				hex[65],
				value[128];

	snprintf(prefix, sizeof(prefix), "%lld%c", (long long) now, sep);
	hmac_sha256_hex(src, prefix, body, len, hex);
	snprintf(value, sizeof(value), value_fmt, (long long) now, hex);
	hdr_add(out, header, value);
	return 0;
}

static int
sign_stripe(const sim_source *src, const char *body, size_t len,
			int64_t now, hdr_list *out)
{
	return sign_ts_hex(src, body, len, now, '.', "Stripe-Signature", "t=%lld,v1=%s", out);
}

static int
sign_shopify(const sim_source *src, const char *body, size_t len,
			 int64_t now, hdr_list *out)
{
	unsigned char mac[32];
	char		b64[48];

	(void) now;
	hmac_sha256(src, "", body, len, mac);
	base64_encode(mac, 32, b64);
	hdr_add(out, "X-Shopify-Hmac-Sha256", b64);
	return 0;
}

static int
sign_standard(const sim_source *src, const char *body, size_t len,
			  int64_t now, hdr_list *out)
{
	const char *id = hdr_get(out, "webhook-id");
	unsigned char mac[32];
	char		ts[24],
				b64[48],
				value[64];
	sbuf		prefix;

	if (id == NULL)
		return -1;
	snprintf(ts, sizeof(ts), "%lld", (long long) now);
	sb_init(&prefix);
	sb_printf(&prefix, "%s.%s.", id, ts);
	hmac_sha256(src, prefix.data, body, len, mac);
	sb_free(&prefix);
	base64_encode(mac, 32, b64);
	snprintf(value, sizeof(value), "v1,%s", b64);
	hdr_add(out, "webhook-timestamp", ts);
	hdr_add(out, "webhook-signature", value);
	return 0;
}

/* Body-only schemes: hex HMAC of the body, after prefix, in header. */
static int
sign_body_hex(const sim_source *src, const char *body, size_t len,
			  const char *header, const char *prefix, hdr_list *out)
{
	char		hex[65],
				value[80];

	hmac_sha256_hex(src, "", body, len, hex);
	snprintf(value, sizeof(value), "%s%s", prefix, hex);
	hdr_add(out, header, value);
	return 0;
}

/*
 * The schemes that sign the body alone, hex: sign_<kind>() puts the HMAC,
 * after its prefix, in its header.
 */
#define SIGN_BODY_HEX(name, header, prefix) \
static int \
sign_##name(const sim_source *src, const char *body, size_t len, \
			int64_t now, hdr_list *out) \
{ \
	(void) now; \
	return sign_body_hex(src, body, len, header, prefix, out); \
}
SIGN_BODY_HEX(github, "X-Hub-Signature-256", "sha256=")
SIGN_BODY_HEX(razorpay, "X-Razorpay-Signature", "")
SIGN_BODY_HEX(checkout, "Cko-Signature", "")
SIGN_BODY_HEX(hmac, "X-Webhook-Signature", "")
#undef SIGN_BODY_HEX

static int
sign_slack(const sim_source *src, const char *body, size_t len,
		   int64_t now, hdr_list *out)
{
	char		prefix[40],
				ts[24],
				hex[65],
				value[80];

	snprintf(ts, sizeof(ts), "%lld", (long long) now);
	snprintf(prefix, sizeof(prefix), "v0:%s:", ts);
	hmac_sha256_hex(src, prefix, body, len, hex);
	snprintf(value, sizeof(value), "v0=%s", hex);
	hdr_add(out, "X-Slack-Request-Timestamp", ts);
	hdr_add(out, "X-Slack-Signature", value);
	return 0;
}

static int
sign_paddle(const sim_source *src, const char *body, size_t len,
			int64_t now, hdr_list *out)
{
	return sign_ts_hex(src, body, len, now, ':', "Paddle-Signature", "ts=%lld;h1=%s", out);
}

int
sign_headers(const sim_source *src, const char *body, size_t len,
			 int64_t now, hdr_list *out)
{
	if (out->n + 2 > HDR_MAX)
		return -1;
	return schemes[src->kind].sign(src, body, len, now, out);
}
