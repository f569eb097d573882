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
	const char *name;
	sign_fn		sign;
} sign_scheme;

static int	sign_stripe(const sim_source *src, const char *body, size_t len,
						int64_t now, hdr_list *out);
static int	sign_shopify(const sim_source *src, const char *body, size_t len,
						 int64_t now, hdr_list *out);
static int	sign_standard(const sim_source *src, const char *body, size_t len,
						  int64_t now, hdr_list *out);

static int	sign_github(const sim_source *src, const char *body, size_t len,
						int64_t now, hdr_list *out);

static const sign_scheme schemes[SK__COUNT] = {
	[SK_STRIPE] = {"stripe", sign_stripe},
	[SK_SHOPIFY] = {"shopify", sign_shopify},
	[SK_STANDARD] = {"standard", sign_standard},
	[SK_GITHUB] = {"github", sign_github},
};

const char *
sign_kind_name(sign_kind k)
{
	return schemes[k].name;
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
		snprintf(err, errlen, "--%s expects NAME:SECRET", schemes[kind].name);
		return -1;
	}
	for (i = 0; arg + i < colon; i++)
	{
		char		c = arg[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
		{
			snprintf(err, errlen, "--%s: source name may only contain letters, digits, '-', '_' and '.'",
					 schemes[kind].name);
			return -1;
		}
	}
	src->kind = kind;
	src->name = xstrndup(arg, (size_t) (colon - arg));
	src->secret = xstrdup(colon + 1);
	if (kind == SK_STANDARD)
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

static int
sign_stripe(const sim_source *src, const char *body, size_t len,
			int64_t now, hdr_list *out)
{
	unsigned char mac[32];
	char		prefix[32],
				hex[65],
				value[128];

	snprintf(prefix, sizeof(prefix), "%lld.", (long long) now);
	hmac_sha256(src, prefix, body, len, mac);
	hex_encode(mac, 32, hex);
	snprintf(value, sizeof(value), "t=%lld,v1=%s", (long long) now, hex);
	hdr_add(out, "Stripe-Signature", value);
	return 0;
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

static int
sign_github(const sim_source *src, const char *body, size_t len,
			int64_t now, hdr_list *out)
{
	unsigned char mac[32];
	char		hex[65],
				value[80];

	(void) now;
	hmac_sha256(src, "", body, len, mac);
	hex_encode(mac, 32, hex);
	snprintf(value, sizeof(value), "sha256=%s", hex);
	hdr_add(out, "X-Hub-Signature-256", value);
	return 0;
}

int
sign_headers(const sim_source *src, const char *body, size_t len,
			 int64_t now, hdr_list *out)
{
	if (out->n + 2 > HDR_MAX)
		return -1;
	return schemes[src->kind].sign(src, body, len, now, out);
}
