/*
 * fuzz_verify.c
 *		libFuzzer harness for the receiver's header parsing and signature
 *		verification (verify.c) and header encoding (encode.c).
 *
 * Input layout: byte 0 picks the source kind (and for "hmac" one of a few
 * configurations), then "Name: value" lines up to an empty line are the
 * request headers, and the rest is the body.  The harness checks that
 * nothing crashes or reads out of bounds (ASan/UBSan), that every result is
 * a known one, and, as a standing known answer, that the Standard Webhooks
 * published example still verifies.  The body also goes through
 * rcv_slack_challenge(), whose challenge must lie inside it, quoted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode.h"
#include "verify.h"

#define MAX_HEADERS 32

/* every kind of webhook_inbox_kinds.h, then hmac twice more with other settings */
#define NKINDS (WI_NUM_SOURCE_KINDS + 2)

static rcv_verifier verifiers[NKINDS];

static void
setup(rcv_verifier *v, const char *kind, int variant)
{
	memset(v, 0, sizeof(*v));
	v->scheme = rcv_scheme_lookup(kind);
	v->secrets = calloc(2, sizeof(rcv_secret));
	v->tolerance = 300;
	if (v->scheme->decode_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", &v->secrets[0]) == 0)
		v->nsecrets++;
	if (v->scheme->decode_secret("c2VjcmV0", &v->secrets[v->nsecrets]) == 0)
		v->nsecrets++;
	v->hmac_header = "x-sig";
	if (variant == 1)
	{
		v->hmac_prefix = "sha256=";
		v->hmac_ts_header = "x-ts";
	}
	else if (variant == 2)
	{
		v->hmac_encoding = RCV_ENC_BASE64;
		v->hmac_ts_header = "x-ts";
		v->hmac_id_header = "x-id";
		v->hmac_template = "{id}:{timestamp}:{body}:{body}";
	}
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *body = "{\"test\": 2432232314}";
	rcv_header	hdrs[] = {
		{"webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
		{"webhook-timestamp", "1614265330"},
		{"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	};

	(void) argc;
	(void) argv;
	for (int i = 0; i < NKINDS; i++)
		setup(&verifiers[i], wi_source_kind_name(i < WI_NUM_SOURCE_KINDS ? i : WI_KIND_hmac),
			  i < WI_NUM_SOURCE_KINDS ? 0 : i - WI_NUM_SOURCE_KINDS + 1);
	if (rcv_verify(&verifiers[WI_KIND_standard], hdrs, 3, (const unsigned char *) body,
				   strlen(body), 1614265330) != RCV_OK)
	{
		fprintf(stderr, "Standard Webhooks published vector does not verify\n");
		abort();
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rcv_header	hdrs[MAX_HEADERS];
	int			nhdrs = 0;
	char	   *copy;
	char	   *p;
	char	   *end;
	rcv_verify_result r;
	char	   *lit;

	if (size < 1)
		return 0;
	copy = malloc(size);
	if (copy == NULL)
		return 0;
	/* headers are NUL-free C strings by the time evhttp hands them over */
	memcpy(copy, data + 1, size - 1);
	end = copy + size - 1;
	p = copy;
	while (p < end && nhdrs < MAX_HEADERS)
	{
		char	   *nl = memchr(p, '\n', (size_t) (end - p));
		char	   *colon;

		if (nl == NULL || nl == p)
		{
			if (nl)
				p = nl + 1;
			break;
		}
		*nl = '\0';
		if (memchr(p, '\0', (size_t) (nl - p)) == NULL &&
			(colon = strchr(p, ':')) != NULL)
		{
			*colon = '\0';
			hdrs[nhdrs].name = p;
			hdrs[nhdrs].value = colon + 1 + (colon[1] == ' ');
			nhdrs++;
		}
		p = nl + 1;
	}
	r = rcv_verify(&verifiers[data[0] % NKINDS], hdrs, nhdrs,
				   (const unsigned char *) p, (size_t) (end - p), 1700000000);
	if (r < RCV_OK || r >= RCV_NUM_RESULTS)
		abort();
	/* Slack's handshake reader: a challenge it finds is a string inside the body */
	{
		const unsigned char *tok = NULL;
		size_t		toklen = 0;

		if (rcv_slack_challenge((const unsigned char *) p, (size_t) (end - p), &tok, &toklen) &&
			(tok < (const unsigned char *) p || tok + toklen > (const unsigned char *) end ||
			 toklen < 3 || tok[0] != '"' || tok[toklen - 1] != '"'))
			abort();
	}
	lit = rcv_encode_headers(hdrs, nhdrs);
	free(lit);
	free(copy);
	return 0;
}
