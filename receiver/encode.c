/*
 * encode.c
 *		Turns a delivery's headers into what intake takes: the PostgreSQL
 *		array literal {name1,value1,name2,value2,…} of intake(), or the
 *		same elements in the binary array format, which batch.c joins into
 *		the two-dimensional headers argument of intake_batch(); and the
 *		binary array builder (rcv_abuf) batch.c makes its parameters with.
 *
 * Names are lowercased (HTTP header names are case-insensitive; the
 * extension looks them up in lower case).  Header values may carry bytes
 * that are not UTF-8 (HTTP allows obs-text); such a byte would make the
 * text[] parameter fail and with it the whole group-commit batch, so every
 * invalid byte becomes '?'.  The signature was already checked on the raw
 * bytes, so this changes only what is stored, never what is accepted.
 */
#include "encode.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} buf;

static int
buf_put(buf *b, char c)
{
	if (b->len + 1 >= b->cap)
	{
		size_t		ncap = b->cap ? b->cap * 2 : 256;
		char	   *n = realloc(b->data, ncap);

		if (n == NULL)
			return -1;
		b->data = n;
		b->cap = ncap;
	}
	b->data[b->len++] = c;
	return 0;
}

/* Length of the valid UTF-8 sequence at s (at most avail bytes), or 0. */
static size_t
utf8_seq_len(const unsigned char *s, size_t avail)
{
	size_t		n;
	unsigned int cp;

	if (s[0] < 0x80)
		return 1;
	else if ((s[0] & 0xE0) == 0xC0)
	{
		n = 2;
		cp = s[0] & 0x1F;
	}
	else if ((s[0] & 0xF0) == 0xE0)
	{
		n = 3;
		cp = s[0] & 0x0F;
	}
	else if ((s[0] & 0xF8) == 0xF0)
	{
		n = 4;
		cp = s[0] & 0x07;
	}
	else
		return 0;
	if (n > avail)
		return 0;
	for (size_t i = 1; i < n; i++)
	{
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	/* overlong forms, surrogates and values past U+10FFFF are invalid */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
		(n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
		(cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

/* Append one quoted array element; lower selects lowercasing (names). */
static int
put_element(buf *b, const char *s, int lower)
{
	const unsigned char *p = (const unsigned char *) s;
	size_t		len = strlen(s);

	if (buf_put(b, '"') < 0)
		return -1;
	for (size_t i = 0; i < len;)
	{
		size_t		n = utf8_seq_len(p + i, len - i);

		if (n == 0)
		{
			if (buf_put(b, '?') < 0)
				return -1;
			i++;
			continue;
		}
		for (size_t k = 0; k < n; k++, i++)
		{
			char		c = (char) p[i];

			if (lower && c >= 'A' && c <= 'Z')
				c = (char) (c - 'A' + 'a');
			if ((c == '"' || c == '\\') && buf_put(b, '\\') < 0)
				return -1;
			if (buf_put(b, c) < 0)
				return -1;
		}
	}
	return buf_put(b, '"');
}

/* Append n bytes. */
static int
buf_add(buf *b, const void *p, size_t n)
{
	if (b->len + n >= b->cap)
	{
		size_t		ncap = b->cap ? b->cap : 256;
		char	   *d;

		while (b->len + n >= ncap)
			ncap *= 2;
		d = realloc(b->data, ncap);
		if (d == NULL)
			return -1;
		b->data = d;
		b->cap = ncap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/*
 * Append one binary array element: a 4-byte big-endian length, then the
 * bytes, sanitised as put_element() does (no quoting in this format).
 */
static int
put_binary_element(buf *b, const char *s, int lower)
{
	const unsigned char *p = (const unsigned char *) s;
	size_t		len = strlen(s);
	size_t		start = b->len;
	uint32_t	n;
	unsigned char be[4] = {0, 0, 0, 0};
	size_t		ascii = 0;

	if (buf_add(b, be, 4) < 0)
		return -1;
	/* the common case, plain ASCII: one copy (lowercased in place) */
	while (ascii < len && p[ascii] < 0x80)
		ascii++;
	if (ascii == len)
	{
		if (buf_add(b, s, len) < 0)
			return -1;
		for (size_t i = start + 4; lower && i < b->len; i++)
			if (b->data[i] >= 'A' && b->data[i] <= 'Z')
				b->data[i] = (char) (b->data[i] - 'A' + 'a');
		len = 0;				/* nothing left for the general loop */
	}
	for (size_t i = 0; i < len;)
	{
		size_t		k = utf8_seq_len(p + i, len - i);

		if (k == 0)
		{
			if (buf_put(b, '?') < 0)
				return -1;
			i++;
			continue;
		}
		for (; k > 0; k--, i++)
		{
			char		c = (char) p[i];

			if (lower && c >= 'A' && c <= 'Z')
				c = (char) (c - 'A' + 'a');
			if (buf_put(b, c) < 0)
				return -1;
		}
	}
	n = (uint32_t) (b->len - start - 4);
	b->data[start] = (char) (n >> 24);
	b->data[start + 1] = (char) (n >> 16);
	b->data[start + 2] = (char) (n >> 8);
	b->data[start + 3] = (char) n;
	return 0;
}

/*
 * rcv_encode_header_elements
 *		hdrs as 2 * nhdrs binary array elements (name, value, ...), malloc'd
 *		(caller frees), its length in *len; NULL when out of memory.
 */
char *
rcv_encode_header_elements(const rcv_header *hdrs, int nhdrs, size_t *len)
{
	buf			b = {NULL, 0, 0};

	if (buf_put(&b, '\0') < 0)	/* a zero-length list still gets a buffer */
		goto err;
	b.len = 0;
	for (int i = 0; i < nhdrs; i++)
		if (put_binary_element(&b, hdrs[i].name, 1) < 0 ||
			put_binary_element(&b, hdrs[i].value, 0) < 0)
			goto err;
	*len = b.len;
	return b.data;
err:
	free(b.data);
	return NULL;
}

/*
 * rcv_encode_headers
 *		The array literal for hdrs, NUL-terminated, malloc'd (caller frees);
 *		NULL when out of memory.
 */
char *
rcv_encode_headers(const rcv_header *hdrs, int nhdrs)
{
	buf			b = {NULL, 0, 0};

	if (buf_put(&b, '{') < 0)
		goto err;
	for (int i = 0; i < nhdrs; i++)
	{
		if (i > 0 && buf_put(&b, ',') < 0)
			goto err;
		if (put_element(&b, hdrs[i].name, 1) < 0 ||
			buf_put(&b, ',') < 0 ||
			put_element(&b, hdrs[i].value, 0) < 0)
			goto err;
	}
	if (buf_put(&b, '}') < 0 || buf_put(&b, '\0') < 0)
		goto err;
	return b.data;
err:
	free(b.data);
	return NULL;
}

/*
 * Binary array parameters (the format of array_recv: a header, the
 * dimensions, then each element as a 4-byte length, -1 for NULL, and bytes).
 * Each returns 0, or -1 when memory ran out.
 */

int
rcv_abuf_add(rcv_abuf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap)
	{
		size_t		ncap = b->cap ? b->cap : 64 * 1024;
		char	   *nd;

		while (ncap < b->len + n)
			ncap *= 2;
		nd = realloc(b->data, ncap);
		if (nd == NULL)
			return -1;
		b->data = nd;
		b->cap = ncap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

int
rcv_abuf_int(rcv_abuf *b, int32_t v)
{
	unsigned char be[4] = {(unsigned char) ((uint32_t) v >> 24), (unsigned char) ((uint32_t) v >> 16),
	(unsigned char) ((uint32_t) v >> 8), (unsigned char) v};

	return rcv_abuf_add(b, be, 4);
}

/* Start an array of elemtype with the given dimensions (lower bounds 1). */
int
rcv_abuf_start(rcv_abuf *b, int ndim, const int *dims, int hasnull, int32_t elemtype)
{
	b->len = 0;
	if (rcv_abuf_int(b, ndim) < 0 || rcv_abuf_int(b, hasnull) < 0 || rcv_abuf_int(b, elemtype) < 0)
		return -1;
	for (int i = 0; i < ndim; i++)
		if (rcv_abuf_int(b, dims[i]) < 0 || rcv_abuf_int(b, 1) < 0)
			return -1;
	return 0;
}

int
rcv_abuf_elem(rcv_abuf *b, const void *p, size_t n)
{
	return rcv_abuf_int(b, (int32_t) n) < 0 || rcv_abuf_add(b, p, n) < 0 ? -1 : 0;
}
