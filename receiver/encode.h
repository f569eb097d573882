/*
 * encode.h
 *		Turning request headers into the headers argument of intake() and
 *		intake_batch().
 */
#ifndef RCV_ENCODE_H
#define RCV_ENCODE_H

#include <stddef.h>

#include "verify.h"

extern char *rcv_encode_headers(const rcv_header *hdrs, int nhdrs);
extern char *rcv_encode_header_elements(const rcv_header *hdrs, int nhdrs, size_t *len);

#endif							/* RCV_ENCODE_H */
