/*
 * test_verify.c
 *		Known-answer tests of verify.c and encode.c, run by "make check".
 *
 * The expected signatures are not computed by the code under test: three
 * are the providers' own published examples (Standard Webhooks, GitHub,
 * Slack), the others were computed independently with Perl's Digest::SHA
 * (see the comment at each).  Time-bound schemes are checked against a
 * fixed "now", so the old published timestamps can be used as they are.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "encode.h"
#include "verify.h"

static int	failures;
static int	checks;

#define CHECK_EQ(got, want, what) \
	do { \
		checks++; \
		if ((got) != (want)) \
		{ \
			failures++; \
			fprintf(stderr, "FAIL %s: got %s, want %s\n", (what), \
					rcv_verify_reason(got), rcv_verify_reason(want)); \
		} \
	} while (0)

/* A verifier for kind with one or two secrets (decoded as the kind says). */
static rcv_verifier
make(const char *kind, const char *s1, const char *s2, int tolerance)
{
	rcv_verifier v;

	memset(&v, 0, sizeof(v));
	v.scheme = rcv_scheme_lookup(kind);
	v.secrets = calloc(2, sizeof(rcv_secret));
	v.tolerance = tolerance;
	if (s1 && v.scheme->decode_secret(s1, &v.secrets[v.nsecrets]) == 0)
		v.nsecrets++;
	if (s2 && v.scheme->decode_secret(s2, &v.secrets[v.nsecrets]) == 0)
		v.nsecrets++;
	return v;
}

static void
drop(rcv_verifier *v)
{
	for (int i = 0; i < v->nsecrets; i++)
		rcv_secret_free(&v->secrets[i]);
	free(v->secrets);
}

#define VERIFY(v, hdrs, body, now) \
	rcv_verify(&(v), (hdrs), (int) (sizeof(hdrs) / sizeof((hdrs)[0])), \
			   (const unsigned char *) (body), strlen(body), (now))

/* The example of the Standard Webhooks specification (and svix docs). */
static void
test_standard_published(void)
{
	const char *body = "{\"test\": 2432232314}";
	rcv_verifier v = make("standard", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", NULL, 300);
	rcv_header ok[] = {
		{"webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
		{"webhook-timestamp", "1614265330"},
		{"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	};
	rcv_header svix[] = {
		{"Svix-Id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
		{"Svix-Timestamp", "1614265330"},
		{"Svix-Signature", "v1a,AAAA v1,bm90IGl0 v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	};
	rcv_header wrong_id[] = {
		{"webhook-id", "msg_other"},
		{"webhook-timestamp", "1614265330"},
		{"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	};
	rcv_header no_v1[] = {
		{"webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
		{"webhook-timestamp", "1614265330"},
		{"webhook-signature", "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	};

	CHECK_EQ(VERIFY(v, ok, body, 1614265330), RCV_OK, "standard published vector");
	CHECK_EQ(VERIFY(v, svix, body, 1614265330 + 299), RCV_OK, "standard svix aliases, several signatures");
	CHECK_EQ(VERIFY(v, ok, "{\"test\": 2432232315}", 1614265330), RCV_BAD_SIGNATURE, "standard tampered body");
	CHECK_EQ(VERIFY(v, wrong_id, body, 1614265330), RCV_BAD_SIGNATURE, "standard id is signed");
	CHECK_EQ(VERIFY(v, no_v1, body, 1614265330), RCV_MALFORMED_SIGNATURE, "standard without v1");
	CHECK_EQ(VERIFY(v, ok, body, 1614265330 + 301), RCV_STALE_TIMESTAMP, "standard stale");
	CHECK_EQ(VERIFY(v, ok, body, 1614265330 - 301), RCV_FUTURE_TIMESTAMP, "standard future");
	drop(&v);

	/* the same key without the whsec_ prefix, and a wrong key */
	v = make("standard", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", NULL, 300);
	CHECK_EQ(VERIFY(v, ok, body, 1614265330), RCV_OK, "standard secret without prefix");
	drop(&v);
	v = make("standard", "whsec_AAAAr8GKYqrTwjUPD8ILPZIo2LaLaSw", NULL, 300);
	CHECK_EQ(VERIFY(v, ok, body, 1614265330), RCV_BAD_SIGNATURE, "standard wrong secret");
	drop(&v);
}

/* GitHub's documented example ("Validating webhook deliveries"). */
static void
test_github_published(void)
{
	rcv_verifier v = make("github", "It's a Secret to Everybody", NULL, 300);
	rcv_header ok[] = {{"X-Hub-Signature-256",
	"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}};
	rcv_header noprefix[] = {{"X-Hub-Signature-256",
	"757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}};
	rcv_header sha1[] = {{"X-Hub-Signature", "sha1=0123"}};

	CHECK_EQ(VERIFY(v, ok, "Hello, World!", 0), RCV_OK, "github published vector");
	CHECK_EQ(VERIFY(v, ok, "Hello, World?", 0), RCV_BAD_SIGNATURE, "github tampered");
	CHECK_EQ(VERIFY(v, noprefix, "Hello, World!", 0), RCV_MALFORMED_SIGNATURE, "github without sha256=");
	CHECK_EQ(VERIFY(v, sha1, "Hello, World!", 0), RCV_MISSING_SIGNATURE, "github sha1 only");
	drop(&v);
	/* rotation: the right secret second */
	v = make("github", "old", "It's a Secret to Everybody", 300);
	CHECK_EQ(VERIFY(v, ok, "Hello, World!", 0), RCV_OK, "github second secret");
	drop(&v);
}

/* Slack's documented example ("Verifying requests from Slack"). */
static void
test_slack_published(void)
{
	const char *body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
	rcv_verifier v = make("slack", "8f742231b10e8888abcd99yyyzzz85a5", NULL, 300);
	rcv_header ok[] = {
		{"X-Slack-Request-Timestamp", "1531420618"},
		{"X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"},
	};
	rcv_header nots[] = {
		{"X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"},
	};

	CHECK_EQ(VERIFY(v, ok, body, 1531420618), RCV_OK, "slack published vector");
	CHECK_EQ(VERIFY(v, ok, body, 1531420618 + 3600), RCV_STALE_TIMESTAMP, "slack stale");
	CHECK_EQ(VERIFY(v, nots, body, 1531420618), RCV_MISSING_TIMESTAMP, "slack no timestamp");
	drop(&v);
}

/* Expected values from Perl: hmac_sha256_hex / _base64 (Digest::SHA). */
static void
test_other_schemes(void)
{
	const char *body = "{\"id\":\"evt_1\",\"type\":\"payment_intent.succeeded\"}";
	const long	now = 1700000000;
	rcv_verifier v;

	{
		rcv_header ok[] = {{"Stripe-Signature",
				"t=1700000000,v1=0000000000000000000000000000000000000000000000000000000000000000,"
		"v1=42d95fff4081e0554d101cf8f30cdd971a0114a7d41f88c55159918ce038fe5b,v0=abc"}};
		rcv_header not[] = {{"Stripe-Signature",
		"v1=42d95fff4081e0554d101cf8f30cdd971a0114a7d41f88c55159918ce038fe5b"}};
		rcv_header badt[] = {{"Stripe-Signature",
		"t=17e8,v1=42d95fff4081e0554d101cf8f30cdd971a0114a7d41f88c55159918ce038fe5b"}};

		v = make("stripe", "whsec_test_stripe", NULL, 300);
		CHECK_EQ(VERIFY(v, ok, body, now), RCV_OK, "stripe, second v1 valid");
		CHECK_EQ(VERIFY(v, ok, body, now + 301), RCV_STALE_TIMESTAMP, "stripe stale");
		CHECK_EQ(VERIFY(v, ok, body, now - 301), RCV_FUTURE_TIMESTAMP, "stripe future");
		CHECK_EQ(VERIFY(v, not, body, now), RCV_MALFORMED_SIGNATURE, "stripe without t");
		CHECK_EQ(VERIFY(v, badt, body, now), RCV_MALFORMED_TIMESTAMP, "stripe bad t");
		drop(&v);
	}
	{
		rcv_header ok[] = {{"X-Shopify-Hmac-Sha256", "uGw8Y/Q6BtDDN9WdYLXza56oFRTueNwE9y59aA8hDsg="}};
		rcv_header bad[] = {{"X-Shopify-Hmac-Sha256", "uGw8Y/Q6BtDDN9WdYLXza56oFRTueNwE9y59aA8hD!g="}};

		v = make("shopify", "shpss_secret", NULL, 300);
		CHECK_EQ(VERIFY(v, ok, body, now), RCV_OK, "shopify");
		CHECK_EQ(VERIFY(v, bad, body, now), RCV_MALFORMED_SIGNATURE, "shopify not base64");
		drop(&v);
	}
	{
		rcv_header ok[] = {{"X-Razorpay-Signature", "703e4068b5737db92ced6bd48ce801a9120dfe4aa93d3038aaded28af51df0b6"}};

		v = make("razorpay", "rzp_secret", NULL, 300);
		CHECK_EQ(VERIFY(v, ok, body, now), RCV_OK, "razorpay");
		drop(&v);
		v = make("razorpay", "rzp_secreT", NULL, 300);
		CHECK_EQ(VERIFY(v, ok, body, now), RCV_BAD_SIGNATURE, "razorpay wrong secret");
		drop(&v);
	}
	{
		rcv_header ok[] = {{"Paddle-Signature",
		"ts=1700000000;h1=ac39e9e3cb6157003007f0b4b5052ea09f64d3875a52ecf36c0c57624cf223b3"}};

		v = make("paddle", "pdl_ntfset_secret", NULL, 5);
		CHECK_EQ(VERIFY(v, ok, body, now), RCV_OK, "paddle");
		CHECK_EQ(VERIFY(v, ok, body, now + 6), RCV_STALE_TIMESTAMP, "paddle stale");
		drop(&v);
	}
	{
		rcv_header ok[] = {{"Cko-Signature", "BA386B69DEAABF6AD2DB5DBBAF79C7BD753D23CD4C0F59AB80C3BFC3FA4BA0E3"}};

		v = make("checkout", "cko_key", NULL, 300);
		CHECK_EQ(VERIFY(v, ok, body, now), RCV_OK, "checkout, upper-case hex");
		drop(&v);
	}
	{
		/* template "{timestamp}|{id}|{body}", base64, prefix "v1=" */
		rcv_header ok[] = {
			{"X-Sig", "v1=V7Ig7CcdFvxjDp3pi2iEmfGx0qk9zggpEVDMN928HK8="},
			{"X-Ts", "1700000000"},
			{"X-Id", "evt_9"},
		};
		const char *problem = NULL;

		v = make("hmac", "raw-secret", NULL, 300);
		v.hmac_header = "x-sig";
		v.hmac_prefix = "v1=";
		v.hmac_encoding = RCV_ENC_BASE64;
		v.hmac_ts_header = "x-ts";
		v.hmac_id_header = "x-id";
		v.hmac_template = "{timestamp}|{id}|{body}";
		checks++;
		if (rcv_verifier_check(&v, &problem) != 0)
		{
			failures++;
			fprintf(stderr, "FAIL hmac config refused: %s\n", problem);
		}
		CHECK_EQ(VERIFY(v, ok, body, now), RCV_OK, "hmac template");
		CHECK_EQ(VERIFY(v, ok, body, now + 1000), RCV_STALE_TIMESTAMP, "hmac stale");
		v.hmac_id_header = NULL;
		checks++;
		if (rcv_verifier_check(&v, &problem) == 0)
		{
			failures++;
			fprintf(stderr, "FAIL hmac template with {id} but no id_header accepted\n");
		}
		drop(&v);
	}
}

/*
 * Every kind of include/webhook_inbox_kinds.h has its scheme, found by its
 * name; a name that is no kind has none, and such a source is refused.
 */
static void
test_every_kind(void)
{
	rcv_verifier v;
	const char *problem = NULL;

	for (int k = 0; k < WI_NUM_SOURCE_KINDS; k++)
	{
		const rcv_scheme *sc = rcv_scheme_lookup(wi_source_kind_name(k));

		checks++;
		if (sc == NULL || sc->kind != (WiSourceKind) k || sc->verify == NULL ||
			sc->decode_secret == NULL)
			failures++, fprintf(stderr, "FAIL kind %s has no scheme\n", wi_source_kind_name(k));
	}
	checks += 3;
	if (rcv_scheme_lookup("paypal") != NULL || rcv_scheme_lookup("") != NULL ||
		rcv_scheme_lookup(NULL) != NULL)
		failures++, fprintf(stderr, "FAIL a name that is no kind has a scheme\n");
	memset(&v, 0, sizeof(v));
	v.scheme = rcv_scheme_lookup("paypal");
	if (rcv_verifier_check(&v, &problem) != -1 || strcmp(problem, "unknown kind") != 0)
		failures++, fprintf(stderr, "FAIL a source of no kind is not refused as unknown kind\n");
}

static void
test_decoders_and_encoding(void)
{
	unsigned char out[8];
	size_t		n = 0;
	rcv_header	h[] = {{"X-A", "plain"}, {"Content-Type", "a\"b\\c"}, {"X-Bin", "\xff\xc3\xa9"}};
	char	   *lit;

	checks += 5;
	if (rcv_base64_decode("Zm9vYg==", 8, out, sizeof(out), &n) != 0 || n != 4 ||
		memcmp(out, "foob", 4) != 0)
		failures++, fprintf(stderr, "FAIL base64 padded\n");
	if (rcv_base64_decode("Zm9vYg", 6, out, sizeof(out), &n) != 0 || n != 4)
		failures++, fprintf(stderr, "FAIL base64 unpadded\n");
	if (rcv_base64_decode("Zm9=vYg", 7, out, sizeof(out), &n) == 0)
		failures++, fprintf(stderr, "FAIL base64 inner padding accepted\n");
	if (rcv_hex_decode("0aFf", 4, out, sizeof(out), &n) != 0 || n != 2 || out[1] != 0xff)
		failures++, fprintf(stderr, "FAIL hex\n");
	if (rcv_hex_decode("0g", 2, out, sizeof(out), &n) == 0)
		failures++, fprintf(stderr, "FAIL hex accepted g\n");

	lit = rcv_encode_headers(h, 3);
	checks++;
	if (lit == NULL || strcmp(lit, "{\"x-a\",\"plain\",\"content-type\",\"a\\\"b\\\\c\","
							  "\"x-bin\",\"?\xc3\xa9\"}") != 0)
		failures++, fprintf(stderr, "FAIL encode_headers: %s\n", lit ? lit : "(null)");
	free(lit);
}

/*
 * Slack's url_verification body (the example of Slack's url_verification
 * event page) is recognised with its challenge token; other bodies are
 * ordinary deliveries.
 */
static void
test_slack_challenge(void)
{
	static const struct
	{
		const char *body;
		const char *token;		/* NULL: not the handshake */
	}			cases[] = {
		{"{\"token\": \"Jhj5dZrVaK7ZwHHjRyZWjbDl\", \"challenge\": "
		 "\"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P\", \"type\": \"url_verification\"}",
		"\"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P\""},
		{" {\"type\":\"url_verification\",\"x\":{\"a\":[1,\"}\",null]},\"challenge\":\"a\\\"b\\u00e9\"}\n",
		"\"a\\\"b\\u00e9\""},
		{"{\"type\":\"event_callback\",\"challenge\":\"abc\",\"event_id\":\"Ev1\"}", NULL},
		{"{\"type\":\"url_verification\"}", NULL},
		{"{\"type\":\"url_verification\",\"challenge\":\"\"}", NULL},
		{"{\"type\":\"url_verification\",\"challenge\":42}", NULL},
		{"{\"type\":\"url_verification\",\"challenge\":\"abc\"", NULL},
		{"{\"type\":\"url_verification\",\"challenge\":\"abc\"} x", NULL},
		{"{\"type\":\"url_verification\",\"challenge\":\"a\\qb\"}", NULL},
		{"{\"type\":\"url_verification\",\"challenge\":\"a\nb\"}", NULL},
		{"{\"event\":{\"type\":\"url_verification\"},\"challenge\":\"abc\"}", NULL},
		{"[\"url_verification\"]", NULL},
		{"", NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		const unsigned char *tok = NULL;
		size_t		n = 0;
		int			got = rcv_slack_challenge((const unsigned char *) cases[i].body,
											  strlen(cases[i].body), &tok, &n);

		checks++;
		if (cases[i].token == NULL ? got != 0 :
			(got != 1 || n != strlen(cases[i].token) || memcmp(tok, cases[i].token, n) != 0))
		{
			failures++;
			fprintf(stderr, "FAIL slack challenge case %zu: got %d\n", i, got);
		}
	}
}

int
main(void)
{
	test_standard_published();
	test_github_published();
	test_slack_published();
	test_slack_challenge();
	test_other_schemes();
	test_every_kind();
	test_decoders_and_encoding();
	printf("%d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
