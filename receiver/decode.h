/*
 * decode.h
 *		Hex and base64 decoding of signatures and secrets (decode.c).
 */
#ifndef RCV_DECODE_H
#define RCV_DECODE_H

#include <stddef.h>

extern int	rcv_hex_decode(const char *s, size_t slen, unsigned char *out,
						   size_t outmax, size_t *outlen);
extern int	rcv_base64_decode(const char *s, size_t slen, unsigned char *out,
							  size_t outmax, size_t *outlen);

#endif							/* RCV_DECODE_H */
