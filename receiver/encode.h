/*
 * encode.h
 *		Turning request headers into the headers argument of intake() and
 *		intake_batch().
 */
#ifndef RCV_ENCODE_H
#define RCV_ENCODE_H

#include <stddef.h>

#include <stdint.h>

#include "verify.h"

/* A growing buffer holding one array in PostgreSQL's binary array format. */
typedef struct rcv_abuf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} rcv_abuf;

extern char *rcv_encode_headers(const rcv_header *hdrs, int nhdrs);
extern char *rcv_encode_header_elements(const rcv_header *hdrs, int nhdrs, size_t *len);
extern int	rcv_abuf_add(rcv_abuf *b, const void *p, size_t n);
extern int	rcv_abuf_int(rcv_abuf *b, int32_t v);
extern int	rcv_abuf_start(rcv_abuf *b, int ndim, const int *dims, int hasnull,
						   int32_t elemtype);
extern int	rcv_abuf_elem(rcv_abuf *b, const void *p, size_t n);

#endif							/* RCV_ENCODE_H */
