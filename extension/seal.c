/*
 * seal.c
 *		Encryption at rest of the secrets the database keeps for providers
 *		(a GitHub App's private key, installation and shop access tokens,
 *		refresh tokens, a source's signing secrets and api_token):
 *		AES-256-GCM with OpenSSL's EVP interface, under a key read from the
 *		file webhook_inbox.key_file names.
 *
 * The key never enters the database: a dump, a base backup or a stolen
 * table holds ciphertext only, and a restore elsewhere needs the key file
 * too (as Supabase Vault keeps its root key out of the database).  The
 * file holds 32 bytes, raw or as 64 hexadecimal digits (a trailing newline
 * allowed; 32 hexadecimal digits alone are half a key, refused, not taken
 * as raw bytes); it must not be readable by group or others.  It is read on each
 * use, so replacing it takes effect at once, and the key is wiped from
 * memory after use.
 *
 * A sealed value is
 *		version (1 byte, 1) | key id (8) | nonce (12) | ciphertext | tag (16)
 * where the key id is the start of SHA-256("webhook_inbox key id" | key):
 * it tells "sealed under another key" apart from "altered", and names no
 * part of the key.  The additional authenticated data is the context the
 * caller names (source, tenant and field), so a sealed value copied into
 * another row or column does not authenticate there.
 *
 * Text columns that were plaintext before (a source's signing secrets and
 * api_token) keep their type: a sealed value there is SEAL_TEXT_PREFIX and
 * the sealed bytes in base64, and a value without the prefix is plaintext,
 * as a database without a key file keeps it.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "common/base64.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "pg_compat.h"
#include "seal.h"
#include "webhook_inbox_hex.h"

char	   *wi_key_file = NULL;

#define SEAL_VERSION	1
#define SEAL_KEY_LEN	32
#define SEAL_KEYID_LEN	8
#define SEAL_NONCE_LEN	12
#define SEAL_TAG_LEN	16
#define SEAL_HEAD_LEN	(1 + SEAL_KEYID_LEN + SEAL_NONCE_LEN)
#define SEAL_AAD_PREFIX "webhook_inbox sealed secret\n"

typedef struct SealKey
{
	unsigned char key[SEAL_KEY_LEN];
	unsigned char id[SEAL_KEYID_LEN];
} SealKey;

/*
 * The hexadecimal digits that begin the n bytes at b (what the file held:
 * the buffer past them is neither read nor terminated).
 */
static size_t
hex_span(const unsigned char *b, size_t n)
{
	size_t		i = 0;

	while (i < n && wi_hex_digit(b[i]) >= 0)
		i++;
	return i;
}

/*
 * Reads the key file path into *k, or raises an error naming the file and
 * what is wrong with it (never its content).
 */
static void
load_key_from(const char *path, SealKey *k)
{
	unsigned char buf[160];
	ssize_t		n;
	int			fd;
	struct stat st;
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;
	EVP_MD_CTX *md;

	if (path == NULL || path[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook_inbox.key_file is not set"),
				 errdetail("Provider secrets are encrypted at rest under a key kept in a file outside the database."),
				 errhint("Create a file holding 64 hexadecimal digits (for example: openssl rand -hex 32 > FILE; chmod 600 FILE) and set webhook_inbox.key_file to its path.")));
	fd = open(path, O_RDONLY | PG_BINARY, 0);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open key file \"%s\": %m", path),
				 errhint("webhook_inbox.key_file must name a file the server can read.")));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
	{
		close(fd);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("key file \"%s\" is not a regular file", path)));
	}
	if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
	{
		close(fd);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("key file \"%s\" has group or world access", path),
				 errdetail("Its permissions are %04o.", (unsigned int) (st.st_mode & 07777)),
				 errhint("Make it readable by the server's user only: chmod 600.")));
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read key file \"%s\": %m", path)));

	if (n == SEAL_KEY_LEN && hex_span(buf, n) < SEAL_KEY_LEN)
		memcpy(k->key, buf, SEAL_KEY_LEN);
	else
	{
		ssize_t		len = n;
		bool		ok;

		while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
						   buf[len - 1] == ' '))
			len--;
		ok = len == 2 * SEAL_KEY_LEN;
		for (int i = 0; ok && i < SEAL_KEY_LEN; i++)
		{
			int			hi = wi_hex_digit((unsigned char) buf[2 * i]);
			int			lo = wi_hex_digit((unsigned char) buf[2 * i + 1]);

			if (hi < 0 || lo < 0)
				ok = false;
			else
				k->key[i] = (unsigned char) (hi << 4 | lo);
		}
		if (!ok)
		{
			bool		hex = len > 0 && hex_span(buf, len) == (size_t) len;

			explicit_bzero(buf, sizeof(buf));
			explicit_bzero(k->key, sizeof(k->key));
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("key file \"%s\" does not hold a 256-bit key", path),
					 hex ? errdetail("It holds %zd hexadecimal digits; a key is 64 of them, or 32 raw bytes.", len) :
					 errdetail("It holds %zd bytes; a key is 32 raw bytes, or 64 hexadecimal digits.", n),
					 errhint("Generate one with: openssl rand -hex 32.")));
		}
	}
	explicit_bzero(buf, sizeof(buf));

	md = EVP_MD_CTX_new();
	if (md == NULL ||
		EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 ||
		EVP_DigestUpdate(md, "webhook_inbox key id", 20) != 1 ||
		EVP_DigestUpdate(md, k->key, SEAL_KEY_LEN) != 1 ||
		EVP_DigestFinal_ex(md, digest, &dlen) != 1)
	{
		EVP_MD_CTX_free(md);
		explicit_bzero(k->key, sizeof(k->key));
		elog(ERROR, "webhook_inbox: SHA-256 failed");
	}
	EVP_MD_CTX_free(md);
	memcpy(k->id, digest, SEAL_KEYID_LEN);
}

/* the key of webhook_inbox.key_file */
static void
load_key(SealKey *k)
{
	load_key_from(wi_key_file, k);
}

static char *
key_id_hex(const unsigned char *id)
{
	char	   *out = palloc(2 * SEAL_KEYID_LEN + 1);

	for (int i = 0; i < SEAL_KEYID_LEN; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
	return out;
}

/* The AAD: a fixed prefix and the caller's context. */
static bool
add_aad(EVP_CIPHER_CTX *ctx, const char *context, bool encrypt)
{
	int			outl;
	int			(*update) (EVP_CIPHER_CTX *, unsigned char *, int *, const unsigned char *, int);

	update = encrypt ? EVP_EncryptUpdate : EVP_DecryptUpdate;
	return update(ctx, NULL, &outl, (const unsigned char *) SEAL_AAD_PREFIX,
				  (int) strlen(SEAL_AAD_PREFIX)) == 1 &&
		update(ctx, NULL, &outl, (const unsigned char *) context, (int) strlen(context)) == 1;
}

bytea *
wi_seal(const char *plain, size_t len, const char *context)
{
	SealKey		k;
	EVP_CIPHER_CTX *ctx;
	bytea	   *out;
	unsigned char *p;
	int			outl = 0;
	int			finl = 0;
	bool		ok;

	if (len > 1024 * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("secret is too long to encrypt"),
				 errdetail("It is %zu bytes; the limit is 1 MB.", len)));
	load_key(&k);
	out = palloc(VARHDRSZ + SEAL_HEAD_LEN + len + SEAL_TAG_LEN);
	p = (unsigned char *) VARDATA(out);
	p[0] = SEAL_VERSION;
	memcpy(p + 1, k.id, SEAL_KEYID_LEN);
	if (RAND_bytes(p + 1 + SEAL_KEYID_LEN, SEAL_NONCE_LEN) != 1)
	{
		explicit_bzero(&k, sizeof(k));
		elog(ERROR, "webhook_inbox: RAND_bytes failed");
	}
	ctx = EVP_CIPHER_CTX_new();
	ok = ctx != NULL &&
		EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, SEAL_NONCE_LEN, NULL) == 1 &&
		EVP_EncryptInit_ex(ctx, NULL, NULL, k.key, p + 1 + SEAL_KEYID_LEN) == 1 &&
		add_aad(ctx, context, true) &&
		EVP_EncryptUpdate(ctx, p + SEAL_HEAD_LEN, &outl, (const unsigned char *) plain, (int) len) == 1 &&
		EVP_EncryptFinal_ex(ctx, p + SEAL_HEAD_LEN + outl, &finl) == 1 &&
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_LEN,
							p + SEAL_HEAD_LEN + outl + finl) == 1;
	EVP_CIPHER_CTX_free(ctx);
	explicit_bzero(&k, sizeof(k));
	if (!ok)
		elog(ERROR, "webhook_inbox: AES-256-GCM encryption failed");
	SET_VARSIZE(out, VARHDRSZ + SEAL_HEAD_LEN + outl + finl + SEAL_TAG_LEN);
	return out;
}

char *
wi_unseal(const bytea *sealed, const char *context)
{
	return wi_unseal_with(sealed, context, wi_key_file);
}

char *
wi_unseal_with(const bytea *sealed, const char *context, const char *key_file)
{
	SealKey		k;
	EVP_CIPHER_CTX *ctx;
	const unsigned char *p = (const unsigned char *) VARDATA_ANY(sealed);
	size_t		n = VARSIZE_ANY_EXHDR(sealed);
	size_t		clen;
	char	   *out;
	int			outl = 0;
	int			finl = 0;
	bool		ok;

	if (n < SEAL_HEAD_LEN + SEAL_TAG_LEN || p[0] != SEAL_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("secret for %s is not an encrypted value", context),
				 errdetail("It is %zu bytes and starts with byte %d; webhook_inbox writes version %d.",
						   n, n > 0 ? (int) p[0] : -1, SEAL_VERSION)));
	load_key_from(key_file, &k);
	if (memcmp(p + 1, k.id, SEAL_KEYID_LEN) != 0)
	{
		char	   *want = key_id_hex(p + 1);
		char	   *have = key_id_hex(k.id);

		explicit_bzero(&k, sizeof(k));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PASSWORD),
				 errmsg("secret for %s was encrypted under another key", context),
				 errdetail("It was encrypted under key id %s; key file \"%s\" holds key id %s.",
						   want, key_file, have),
				 strncmp(context, "sources(", 8) == 0 ?
				 errhint("Set webhook_inbox.key_file to the key the secrets were encrypted with; after a rotation to a new key, run SELECT webhook_inbox.reencrypt_source_secrets('<the old key file>');") :
				 errhint("Set webhook_inbox.key_file to the key the secrets were encrypted with; after a rotation to a new key, run SELECT webhook_inbox.reencrypt_credentials('<the old key file>');")));
	}
	clen = n - SEAL_HEAD_LEN - SEAL_TAG_LEN;
	out = palloc(clen + 1);
	ctx = EVP_CIPHER_CTX_new();
	ok = ctx != NULL &&
		EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, SEAL_NONCE_LEN, NULL) == 1 &&
		EVP_DecryptInit_ex(ctx, NULL, NULL, k.key, p + 1 + SEAL_KEYID_LEN) == 1 &&
		add_aad(ctx, context, false) &&
		EVP_DecryptUpdate(ctx, (unsigned char *) out, &outl, p + SEAL_HEAD_LEN, (int) clen) == 1 &&
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_LEN,
							(void *) (p + n - SEAL_TAG_LEN)) == 1 &&
		EVP_DecryptFinal_ex(ctx, (unsigned char *) out + outl, &finl) == 1;
	EVP_CIPHER_CTX_free(ctx);
	explicit_bzero(&k, sizeof(k));
	if (!ok)
	{
		explicit_bzero(out, clen + 1);
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("secret for %s does not authenticate", context),
				 errdetail("The value was altered, or copied from another row or column.")));
	}
	out[outl + finl] = '\0';
	if (strlen(out) != (size_t) (outl + finl))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("secret for %s holds a NUL byte", context)));
	return out;
}

PG_FUNCTION_INFO_V1(wi_seal_sql);
PG_FUNCTION_INFO_V1(wi_unseal_sql);
PG_FUNCTION_INFO_V1(wi_unseal_with_sql);
PG_FUNCTION_INFO_V1(wi_key_id_sql);

/* _seal(plain text, context text) → bytea */
Datum
wi_seal_sql(PG_FUNCTION_ARGS)
{
	text	   *plain = PG_GETARG_TEXT_PP(0);
	char	   *context = text_to_cstring(PG_GETARG_TEXT_PP(1));

	PG_RETURN_BYTEA_P(wi_seal(VARDATA_ANY(plain), VARSIZE_ANY_EXHDR(plain), context));
}

/* _unseal(sealed bytea, context text) → text */
Datum
wi_unseal_sql(PG_FUNCTION_ARGS)
{
	bytea	   *sealed = PG_GETARG_BYTEA_PP(0);
	char	   *context = text_to_cstring(PG_GETARG_TEXT_PP(1));

	PG_RETURN_TEXT_P(cstring_to_text(wi_unseal(sealed, context)));
}

/* _unseal_with(sealed bytea, context text, key_file text) → text */
Datum
wi_unseal_with_sql(PG_FUNCTION_ARGS)
{
	bytea	   *sealed = PG_GETARG_BYTEA_PP(0);
	char	   *context = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *key_file = text_to_cstring(PG_GETARG_TEXT_PP(2));

	PG_RETURN_TEXT_P(cstring_to_text(wi_unseal_with(sealed, context, key_file)));
}

/* _key_id(key_file text) → the key id of the key in key_file (hex) */
Datum
wi_key_id_sql(PG_FUNCTION_ARGS)
{
	SealKey		k;
	char	   *id;

	load_key_from(text_to_cstring(PG_GETARG_TEXT_PP(0)), &k);
	id = key_id_hex(k.id);
	explicit_bzero(&k, sizeof(k));
	PG_RETURN_TEXT_P(cstring_to_text(id));
}


/*
 * Sealed values in text columns: SEAL_TEXT_PREFIX | base64(sealed bytes).
 */
#define SEAL_TEXT_PREFIX "wi-sealed:"
#define SEAL_TEXT_PREFIX_LEN (sizeof(SEAL_TEXT_PREFIX) - 1)

static bool
key_configured(void)
{
	return wi_key_file != NULL && wi_key_file[0] != '\0';
}

static bool
text_is_sealed(const char *v, size_t len)
{
	return len >= SEAL_TEXT_PREFIX_LEN && memcmp(v, SEAL_TEXT_PREFIX, SEAL_TEXT_PREFIX_LEN) == 0;
}

/* The sealed bytes of a sealed text value, or an error naming context. */
static bytea *
text_sealed_bytes(const char *v, size_t len, const char *context)
{
	const char *b64 = v + SEAL_TEXT_PREFIX_LEN;
	int			b64len = (int) (len - SEAL_TEXT_PREFIX_LEN);
	int			maxlen = pg_b64_dec_len(b64len);
	bytea	   *out = palloc(VARHDRSZ + maxlen);
	int			n;

	n = pg_b64_decode(b64, b64len, (wi_b64_bytes *) VARDATA(out), maxlen);
	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("secret for %s is not an encrypted value", context),
				 errdetail("It starts with \"%s\" but the rest is not base64.", SEAL_TEXT_PREFIX)));
	SET_VARSIZE(out, VARHDRSZ + n);
	return out;
}

static text *
unseal_text(text *value, const char *context, const char *key_file)
{
	const char *v = VARDATA_ANY(value);
	size_t		len = VARSIZE_ANY_EXHDR(value);
	bytea	   *sealed;

	if (!text_is_sealed(v, len))
		return value;
	sealed = text_sealed_bytes(v, len, context);
	if (key_file == NULL || key_file[0] == '\0')
	{
		const unsigned char *p = (const unsigned char *) VARDATA(sealed);

		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("secret for %s is encrypted and webhook_inbox.key_file is not set", context),
				 VARSIZE(sealed) - VARHDRSZ >= 1 + SEAL_KEYID_LEN ?
				 errdetail("It was encrypted under key id %s, with a key kept in a file outside the database.",
						   key_id_hex(p + 1)) : 0,
				 errhint("Set webhook_inbox.key_file to the key file of the database the secrets were encrypted in (a restore needs the key file as well as the dump).")));
	}
	return cstring_to_text(wi_unseal_with(sealed, context, key_file));
}

PG_FUNCTION_INFO_V1(wi_seal_text_sql);
PG_FUNCTION_INFO_V1(wi_unseal_text_sql);
PG_FUNCTION_INFO_V1(wi_unseal_text_with_sql);
PG_FUNCTION_INFO_V1(wi_text_key_id_sql);
PG_FUNCTION_INFO_V1(wi_key_configured_sql);

/*
 * _seal_text(value text, context text) → text: value sealed under the key
 * of webhook_inbox.key_file; unchanged when it is sealed already, empty
 * (so that CHECK constraints still see it), or no key file is set.
 */
Datum
wi_seal_text_sql(PG_FUNCTION_ARGS)
{
	text	   *value = PG_GETARG_TEXT_PP(0);
	const char *v = VARDATA_ANY(value);
	size_t		len = VARSIZE_ANY_EXHDR(value);
	char	   *context;
	bytea	   *sealed;
	int			slen;
	int			maxlen;
	text	   *out;
	int			n;

	if (len == 0 || text_is_sealed(v, len) || !key_configured())
		PG_RETURN_TEXT_P(value);
	context = text_to_cstring(PG_GETARG_TEXT_PP(1));
	sealed = wi_seal(v, len, context);
	slen = (int) (VARSIZE(sealed) - VARHDRSZ);
	maxlen = pg_b64_enc_len(slen);
	out = palloc(VARHDRSZ + SEAL_TEXT_PREFIX_LEN + maxlen);
	memcpy(VARDATA(out), SEAL_TEXT_PREFIX, SEAL_TEXT_PREFIX_LEN);
	n = pg_b64_encode((const wi_b64_bytes *) VARDATA(sealed), slen,
					  VARDATA(out) + SEAL_TEXT_PREFIX_LEN, maxlen);
	if (n < 0)
		elog(ERROR, "webhook_inbox: base64 encoding failed");
	SET_VARSIZE(out, VARHDRSZ + SEAL_TEXT_PREFIX_LEN + n);
	PG_RETURN_TEXT_P(out);
}

/*
 * _unseal_text(value text, context text) → text: the plaintext of a value
 * _seal_text() sealed, under the key of webhook_inbox.key_file; a value
 * that is not sealed is returned as it is.
 */
Datum
wi_unseal_text_sql(PG_FUNCTION_ARGS)
{
	text	   *value = PG_GETARG_TEXT_PP(0);
	char	   *context = text_to_cstring(PG_GETARG_TEXT_PP(1));

	PG_RETURN_TEXT_P(unseal_text(value, context, wi_key_file));
}

/* _unseal_text_with(value text, context text, key_file text) → text */
Datum
wi_unseal_text_with_sql(PG_FUNCTION_ARGS)
{
	text	   *value = PG_GETARG_TEXT_PP(0);
	char	   *context = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *key_file = text_to_cstring(PG_GETARG_TEXT_PP(2));

	PG_RETURN_TEXT_P(unseal_text(value, context, key_file));
}

/*
 * _text_key_id(value text) → the key id (hex) a sealed text value was
 * encrypted under; NULL for plaintext.
 */
Datum
wi_text_key_id_sql(PG_FUNCTION_ARGS)
{
	text	   *value = PG_GETARG_TEXT_PP(0);
	const char *v = VARDATA_ANY(value);
	size_t		len = VARSIZE_ANY_EXHDR(value);
	bytea	   *sealed;

	if (!text_is_sealed(v, len))
		PG_RETURN_NULL();
	sealed = text_sealed_bytes(v, len, "a sealed value");
	if (VARSIZE(sealed) - VARHDRSZ < 1 + SEAL_KEYID_LEN)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(key_id_hex((const unsigned char *) VARDATA(sealed) + 1)));
}

/* _key_configured() → whether webhook_inbox.key_file names a file */
Datum
wi_key_configured_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_configured());
}
