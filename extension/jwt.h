/*
 * jwt.h
 *		RS256 JSON Web Tokens for a GitHub App (jwt.c).
 */
#ifndef WI_JWT_H
#define WI_JWT_H

#include "postgres.h"

/* how far back iat is set, and how far ahead exp (GitHub allows 10 min) */
#define WI_JWT_BACKDATE_S	60
#define WI_JWT_LIFETIME_S	540

/*
 * Checks that pem is an unencrypted RSA private key of at least 2048 bits,
 * PKCS#1 ("BEGIN RSA PRIVATE KEY", GitHub's download) or PKCS#8 ("BEGIN
 * PRIVATE KEY"); returns its size in bits, or raises a clear error.
 */
extern int	wi_rsa_key_bits(const char *pem);

/*
 * The JWT {"alg":"RS256","typ":"JWT"}.{"iat":now-60,"exp":now+540,
 * "iss":iss} signed with pem; palloc'd.  Raises an error for a bad key.
 */
extern char *wi_jwt_rs256(const char *pem, const char *iss, int64 now);

#endif							/* WI_JWT_H */
