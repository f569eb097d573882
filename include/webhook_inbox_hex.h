/*
 * webhook_inbox_hex.h
 *		The value of one hexadecimal digit, for every program of the project:
 *		the extension (seal key files), the receiver (hex signatures) and the
 *		simulator (JSON \u escapes) each read hex, and read it the same way.
 *
 * Plain C, no dependencies, like webhook_inbox_kinds.h: included by
 * PostgreSQL backend code, libFuzzer harnesses and the standalone programs.
 */
#ifndef WEBHOOK_INBOX_HEX_H
#define WEBHOOK_INBOX_HEX_H

/* 0-15 for a digit of either case, -1 for any other character. */
static inline int
wi_hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif							/* WEBHOOK_INBOX_HEX_H */
