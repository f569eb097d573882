/*
 * decode.c
 *		Decoding the hex and base64 signatures the schemes of verify.c read
 *		(declared in decode.h): pure functions over bytes, bounded by the
 *		caller's output buffer.
 */
#include "decode.h"

#include "webhook_inbox_hex.h"

/*
 * rcv_hex_decode
 *		Decode slen hex digits of s into at most outmax bytes.
 *
 * Returns 0 and sets *outlen, or -1 for odd length, a non-hex digit or
 * overflow.
 */
int
rcv_hex_decode(const char *s, size_t slen, unsigned char *out, size_t outmax,
			   size_t *outlen)
{
	if (slen % 2 != 0 || slen / 2 > outmax)
		return -1;
	for (size_t i = 0; i < slen; i += 2)
	{
		int			hi = wi_hex_digit((unsigned char) s[i]);
		int			lo = wi_hex_digit((unsigned char) s[i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i / 2] = (unsigned char) (hi << 4 | lo);
	}
	*outlen = slen / 2;
	return 0;
}

static int
b64val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * rcv_base64_decode
 *		Decode standard base64 (RFC 4648, section 4) with optional padding.
 *
 * Returns 0 and sets *outlen, or -1 for a character outside the alphabet,
 * padding in the middle, an impossible length or overflow.
 */
int
rcv_base64_decode(const char *s, size_t slen, unsigned char *out,
				  size_t outmax, size_t *outlen)
{
	unsigned int acc = 0;
	int			bits = 0;
	size_t		n = 0;
	size_t		pad = 0;

	while (slen > 0 && s[slen - 1] == '=' && pad < 2)
	{
		slen--;
		pad++;
	}
	if (slen % 4 == 1 || (pad > 0 && (slen + pad) % 4 != 0))
		return -1;
	for (size_t i = 0; i < slen; i++)
	{
		int			d = b64val((unsigned char) s[i]);

		if (d < 0)
			return -1;
		acc = (acc << 6) | (unsigned int) d;
		bits += 6;
		if (bits >= 8)
		{
			bits -= 8;
			if (n >= outmax)
				return -1;
			out[n++] = (unsigned char) (acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	*outlen = n;
	return 0;
}
