/*
 * jwt.c
 *		The JSON Web Token a GitHub App authenticates with (RFC 7519, RS256
 *		of RFC 7518), made with OpenSSL's EVP interface.
 *
 * GitHub's rules ("Generating a JSON Web Token (JWT) for a GitHub App"):
 * alg RS256; iat a little in the past, for clock drift (60 seconds, as
 * GitHub recommends); exp at most 10 minutes after it (here iat + 600 - 1
 * minute of margin: now + 540); iss the app's client id or app id.  Each
 * part is base64url without padding.  The private key is GitHub's download
 * (PKCS#1, "BEGIN RSA PRIVATE KEY") or its PKCS#8 conversion ("BEGIN
 * PRIVATE KEY"); OpenSSL's PEM reader takes both.
 *
 * Nothing here reads JSON: the header and claims are written, never parsed.
 */
#include "postgres.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "common/base64.h"
#include "lib/stringinfo.h"
#include "utils/json.h"

#include "jwt.h"
#include "pg_compat.h"

/* the reason OpenSSL gave for the last failure, for errdetail */
static const char *
ssl_reason(void)
{
	unsigned long e = ERR_get_error();
	const char *r;

	ERR_clear_error();
	if (e == 0)
		return "no reason given";
	r = ERR_reason_error_string(e);
	return r ? r : "unknown reason";
}

/* refuses to prompt for a passphrase: an encrypted key is an error */
static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
	*(bool *) u = true;
	return 0;
}

/*
 * Reads pem into an EVP_PKEY the caller frees, checking what wi_rsa_key_bits
 * promises; *bits gets its size.
 */
static EVP_PKEY *
read_key(const char *pem, int *bits)
{
	BIO		   *bio;
	EVP_PKEY   *key;
	bool		asked = false;

	if (strstr(pem, "-----BEGIN ") == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("private key is not in PEM format"),
				 errhint("Give the .pem file GitHub generated for the app (\"-----BEGIN RSA PRIVATE KEY-----\"), or its PKCS#8 form (\"-----BEGIN PRIVATE KEY-----\").")));
	ERR_clear_error();
	bio = BIO_new_mem_buf(pem, -1);
	if (bio == NULL)
		elog(ERROR, "webhook_inbox: BIO_new_mem_buf failed");
	key = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, &asked);
	BIO_free(bio);
	if (key == NULL)
	{
		const char *why = ssl_reason();

		if (asked)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("private key is encrypted with a passphrase"),
					 errhint("Give the key without a passphrase, as GitHub generates it; it is encrypted at rest here.")));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("private key could not be read"),
				 errdetail("OpenSSL: %s.", why),
				 errhint("Give the .pem file GitHub generated for the app, whole, with its BEGIN and END lines.")));
	}
	if (EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA)
	{
		EVP_PKEY_free(key);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("private key is not an RSA key"),
				 errdetail("GitHub signs app JWTs with RS256, which needs an RSA key.")));
	}
	*bits = EVP_PKEY_get_bits(key);
	if (*bits < 2048)
	{
		EVP_PKEY_free(key);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("private key has %d bits", *bits),
				 errdetail("RS256 needs an RSA key of at least 2048 bits.")));
	}
	return key;
}

int
wi_rsa_key_bits(const char *pem)
{
	int			bits;

	EVP_PKEY_free(read_key(pem, &bits));
	return bits;
}

/* Appends data as base64url without padding (RFC 7515, section 2). */
static void
append_b64url(StringInfo out, const char *data, int len)
{
	int			enclen = pg_b64_enc_len(len);
	char	   *enc = palloc(enclen + 1);
	int			n = pg_b64_encode((const wi_b64_bytes *) data, len, enc, enclen);

	if (n < 0)
		elog(ERROR, "webhook_inbox: base64 encoding failed");
	for (int i = 0; i < n; i++)
	{
		if (enc[i] == '=')
			break;
		appendStringInfoChar(out, enc[i] == '+' ? '-' : enc[i] == '/' ? '_' : enc[i]);
	}
	pfree(enc);
}

char *
wi_jwt_rs256(const char *pem, const char *iss, int64 now)
{
	StringInfoData jwt;
	StringInfoData claims;
	EVP_PKEY   *key;
	EVP_MD_CTX *md;
	unsigned char *sig;
	size_t		siglen = 0;
	int			bits;
	bool		ok;
	static const char header[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";

	initStringInfo(&claims);
	appendStringInfo(&claims, "{\"iat\":" INT64_FORMAT ",\"exp\":" INT64_FORMAT ",\"iss\":",
					 now - WI_JWT_BACKDATE_S, now + WI_JWT_LIFETIME_S);
	escape_json(&claims, iss);
	appendStringInfoChar(&claims, '}');

	initStringInfo(&jwt);
	append_b64url(&jwt, header, (int) strlen(header));
	appendStringInfoChar(&jwt, '.');
	append_b64url(&jwt, claims.data, claims.len);

	key = read_key(pem, &bits);
	sig = palloc((bits + 7) / 8 + 16);
	siglen = (bits + 7) / 8 + 16;
	md = EVP_MD_CTX_new();
	ok = md != NULL &&
		EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
		EVP_DigestSign(md, sig, &siglen, (const unsigned char *) jwt.data, jwt.len) == 1;
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not sign the app's JWT"),
				 errdetail("OpenSSL: %s.", ssl_reason())));
	appendStringInfoChar(&jwt, '.');
	append_b64url(&jwt, (const char *) sig, (int) siglen);
	pfree(sig);
	pfree(claims.data);
	return jwt.data;
}
