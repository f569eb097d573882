/*
 * seal.h
 *		Encryption at rest of provider secrets (seal.c): AES-256-GCM under a
 *		key kept in a file outside the database.
 */
#ifndef WI_SEAL_H
#define WI_SEAL_H

#include "postgres.h"

/* webhook_inbox.key_file: the file holding the 256-bit key */
extern char *wi_key_file;

/*
 * Seal plain (len bytes) for the row and field named by context: returns a
 * palloc'd bytea.  Unseal returns the palloc'd, NUL-terminated plaintext.
 * Both raise a clear error when the key file is missing, unreadable or not
 * a 256-bit key, and unseal when the value does not authenticate under the
 * key and context.
 */
extern bytea *wi_seal(const char *plain, size_t len, const char *context);
extern char *wi_unseal(const bytea *sealed, const char *context);
/* the same under the key of key_file instead of webhook_inbox.key_file */
extern char *wi_unseal_with(const bytea *sealed, const char *context, const char *key_file);

#endif							/* WI_SEAL_H */
