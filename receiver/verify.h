/*
 * verify.h
 *		Signature verification of webhook deliveries, one scheme per source kind.
 *
 * Everything here is pure computation over bytes already in memory: no I/O,
 * no libevent, no libpq, so the fuzz harness and the unit test link it alone.
 */
#ifndef RCV_VERIFY_H
#define RCV_VERIFY_H

#include <stddef.h>
#include <time.h>

#include "webhook_inbox_kinds.h"

/* One request header; names are compared case-insensitively. */
typedef struct rcv_header
{
	const char *name;
	const char *value;
} rcv_header;

/* A decoded signing secret (binary-safe). */
typedef struct rcv_secret
{
	unsigned char *key;
	size_t		len;
	struct evp_mac_ctx_st *mac; /* HMAC-SHA256 keyed with it, copied for each
								 * use; NULL if OpenSSL could not make one */
} rcv_secret;

typedef enum rcv_encoding
{
	RCV_ENC_HEX,
	RCV_ENC_BASE64
} rcv_encoding;

struct rcv_scheme;

/*
 * What verification needs to know about a source.  The hmac_* fields are
 * only used by the configurable "hmac" kind (from sources.settings).
 */
typedef struct rcv_verifier
{
	const struct rcv_scheme *scheme;
	rcv_secret *secrets;
	int			nsecrets;
	int			tolerance;		/* seconds, for schemes with a timestamp */
	char	   *hmac_header;	/* signature header name */
	char	   *hmac_prefix;	/* stripped from the header value */
	rcv_encoding hmac_encoding;
	char	   *hmac_ts_header; /* optional timestamp header */
	char	   *hmac_template;	/* signed bytes: {timestamp} {body} {id} */
	char	   *hmac_id_header; /* optional id header, for {id} */
} rcv_verifier;

/* Verification outcomes; everything but RCV_OK is a 401. */
typedef enum rcv_verify_result
{
	RCV_OK = 0,
	RCV_MISSING_SIGNATURE,
	RCV_MALFORMED_SIGNATURE,
	RCV_BAD_SIGNATURE,
	RCV_MISSING_TIMESTAMP,
	RCV_MALFORMED_TIMESTAMP,
	RCV_STALE_TIMESTAMP,
	RCV_FUTURE_TIMESTAMP,
	RCV_MISSING_ID,
	RCV_NUM_RESULTS
} rcv_verify_result;

/* A scheme: its kind and the function that checks one delivery. */
typedef struct rcv_scheme
{
	WiSourceKind kind;
	rcv_verify_result (*verify) (const rcv_verifier *v,
								 const rcv_header *hdrs, int nhdrs,
								 const unsigned char *body, size_t len,
								 time_t now);
	/* how secrets of this kind are turned into key bytes */
	int			(*decode_secret) (const char *secret, rcv_secret *out);

	/*
	 * A scheme that signs the body alone: the header its signature comes
	 * in, the prefix before the signature there ("" for none) and the
	 * signature's encoding.  NULL sig_header for every other scheme.
	 */
	const char *sig_header;
	const char *sig_prefix;
	rcv_encoding sig_encoding;
} rcv_scheme;

extern const rcv_scheme *rcv_scheme_lookup(const char *kind);
extern rcv_verify_result rcv_verify(const rcv_verifier *v,
									const rcv_header *hdrs, int nhdrs,
									const unsigned char *body, size_t len,
									time_t now);
extern const char *rcv_verify_reason(rcv_verify_result r);
extern int	rcv_verifier_check(const rcv_verifier *v, const char **problem);

/* Helpers shared with the rest of the receiver and the tests. */
extern const char *rcv_header_get(const rcv_header *hdrs, int nhdrs,
								  const char *name);

/*
 * Slack's url_verification handshake in a verified body: 1 and the
 * challenge's JSON string token (inside body), or 0.
 */
extern int	rcv_slack_challenge(const unsigned char *body, size_t len,
								const unsigned char **challenge,
								size_t *challenge_len);

/* Wipe and free what a scheme's decode_secret() filled in. */
extern void rcv_secret_free(rcv_secret *s);

#endif							/* RCV_VERIFY_H */
