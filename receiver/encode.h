/*
 * encode.h
 *		Turning request headers into the text[] argument of intake().
 */
#ifndef RCV_ENCODE_H
#define RCV_ENCODE_H

#include "verify.h"

extern char *rcv_encode_headers(const rcv_header *hdrs, int nhdrs);

#endif							/* RCV_ENCODE_H */
