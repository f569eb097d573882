/*
 * webhook_inbox_kinds.h
 *		The source kinds (sources.kind): the one list that the extension, the
 *		receiver, the simulator and the SQL schema all take from.
 *
 * A kind names a provider's signing scheme and payload layout.  Each program
 * keeps its own per-kind table (the extension where a kind's ids travel, the
 * receiver how it verifies, the simulator how it signs), indexed by
 * WiSourceKind and checked at compile time to have one row per kind here.
 * The SQL install and upgrade scripts get their CHECK constraint, the
 * create_source() error hint and the replay-window comment from this file
 * too, substituted at build time by scripts/source-kinds.pl, which reads the
 * rows below: keep one X(...) per line.
 *
 * Per kind, besides its name (as SQL spells it), what its signature covers
 * of the delivery's time:
 *	WI_TS_SIGNED	a timestamp is signed with the body (replays are refused
 *					outside the source's tolerance)
 *	WI_TS_NONE		the body alone is signed: a replayed body is only caught
 *					by its content (sources.replay_window)
 *	WI_TS_SETTINGS	the source's settings say (hmac: a timestamp header is
 *					optional)
 *
 * Plain C, no dependencies: included by PostgreSQL backend code, libFuzzer
 * harnesses and the two standalone programs alike.
 */
#ifndef WEBHOOK_INBOX_KINDS_H
#define WEBHOOK_INBOX_KINDS_H

#include <string.h>

typedef enum WiKindTimestamp
{
	WI_TS_SIGNED,
	WI_TS_NONE,
	WI_TS_SETTINGS
} WiKindTimestamp;

/* X(name, timestamp): every kind, once, in the order documentation lists them */
#define WI_SOURCE_KINDS(X) \
	X(stripe, WI_TS_SIGNED) \
	X(standard, WI_TS_SIGNED) \
	X(shopify, WI_TS_NONE) \
	X(github, WI_TS_NONE) \
	X(razorpay, WI_TS_NONE) \
	X(slack, WI_TS_SIGNED) \
	X(paddle, WI_TS_SIGNED) \
	X(checkout, WI_TS_NONE) \
	X(hmac, WI_TS_SETTINGS)

typedef enum WiSourceKind
{
#define WI_KIND_ENUM_(name, ts) WI_KIND_##name,
	WI_SOURCE_KINDS(WI_KIND_ENUM_)
#undef WI_KIND_ENUM_
	WI_NUM_SOURCE_KINDS
} WiSourceKind;

/* The kind's name as sources.kind holds it, or NULL for a value out of range. */
static inline const char *
wi_source_kind_name(int kind)
{
	switch (kind)
	{
#define WI_KIND_NAME_(name, ts) case WI_KIND_##name: return #name;
			WI_SOURCE_KINDS(WI_KIND_NAME_)
#undef WI_KIND_NAME_
	}
	return NULL;
}

/* The kind called name, or -1 when no kind has that name (or name is NULL). */
static inline int
wi_source_kind_lookup(const char *name)
{
	if (name == NULL)
		return -1;
#define WI_KIND_LOOKUP_(kname, ts) if (strcmp(name, #kname) == 0) return WI_KIND_##kname;
	WI_SOURCE_KINDS(WI_KIND_LOOKUP_)
#undef WI_KIND_LOOKUP_
	return -1;
}

/* What the kind's signature covers of the delivery's time (see above). */
static inline WiKindTimestamp
wi_source_kind_timestamp(WiSourceKind kind)
{
	switch (kind)
	{
#define WI_KIND_TS_(name, ts) case WI_KIND_##name: return ts;
			WI_SOURCE_KINDS(WI_KIND_TS_)
#undef WI_KIND_TS_
		case WI_NUM_SOURCE_KINDS:
			break;
	}
	return WI_TS_SETTINGS;
}

#endif							/* WEBHOOK_INBOX_KINDS_H */
