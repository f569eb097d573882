/*
 * intake.h
 *		What the files of intake (intake.c and intake_*.c) share: a
 *		delivery's row, its source, and the steps each file provides.
 *		Private to intake; outside it only 0.1.0's intake
 *		(compat_0_1_0_intake.c) includes this, for intake_utils.c's helpers.
 */
#ifndef WI_INTAKE_H
#define WI_INTAKE_H

#include "common/cryptohash.h"
#include "utils/jsonb.h"

#include "intake_ids.h"
#include "json_fast.h"
#include "route_cache.h"
#include "route_eval.h"
#include "webhook_inbox.h"

#define MAX_REASON_LEN	200

/* Limits on what a delivery may carry; each is named in its refusal. */
#define MAX_ID_BYTES	255		/* event id, object id and type */
#define MAX_JSON_BYTES	(32 * 1024 * 1024)	/* larger bodies are kept raw */

/*
 * What became of a delivery, and the inbox row's status: enums inside
 * intake, their names (intake_outcome_name(), intake_status_name()) only
 * where they leave it for SQL.  The zero value of each is "not decided yet".
 */
typedef enum IntakeOutcome
{
	INTAKE_UNDECIDED = 0,
	INTAKE_NEW,					/* a new inbox row */
	INTAKE_DUPLICATE,			/* already in the inbox, or a replayed body */
	INTAKE_QUARANTINED,			/* a new inbox row set aside with a reason */
	INTAKE_REFUSED,				/* nothing stored; see IntakeRefusal */
	INTAKE_OUTCOME__COUNT
} IntakeOutcome;

typedef enum IntakeStatus
{
	INTAKE_STATUS_NONE = 0,
	INTAKE_STATUS_PENDING,
	INTAKE_STATUS_IGNORED,
	INTAKE_STATUS_QUARANTINED,
	INTAKE_STATUS__COUNT
} IntakeStatus;

/*
 * Why a delivery was refused.  The name begins its reason ("name: detail");
 * intake() raises each with the errcode of intake_refusal_errcode().
 */
typedef enum IntakeRefusal
{
	INTAKE_REFUSE_MISSING_SOURCE,
	INTAKE_REFUSE_MISSING_BODY,
	INTAKE_REFUSE_MALFORMED_HEADERS,
	INTAKE_REFUSE_UNKNOWN_SOURCE,
	INTAKE_REFUSE_SOURCE_DISABLED,
	INTAKE_REFUSE_EVENT_ID_TOO_LONG,
	INTAKE_REFUSE_EVENT_TYPE_TOO_LONG,
	INTAKE_REFUSE_CORRELATION_ID_TOO_LONG,
	INTAKE_REFUSE_TENANT_INVALID,
	INTAKE_REFUSE_TENANT_MISMATCH,
	INTAKE_REFUSE__COUNT
} IntakeRefusal;

/* The source row intake needs. */
typedef struct SourceInfo
{
	char	   *name;
	int32		id;
	char	   *kind;
	bool		enabled;
	Jsonb	   *settings;
	const WiKindLayout *layout;
	Datum		replay_window;	/* interval; valid only if replay */
	bool		replay;			/* digests refuse replays for this source */
} SourceInfo;

/* One delivery of a batch and everything decided about it. */
typedef struct Row
{
	int			ord;			/* 1-based position in the call */
	SourceInfo *src;			/* NULL when refused before lookup */
	char	  **hnames;
	char	  **hvalues;
	int			nheaders;
	bytea	   *body;
	bytea	   *digest;

	Jsonb	   *payload;		/* NULL if the body could not be read */
	char	   *event_id;
	char	   *event_type;
	char	   *correlation_id;
	char	   *delivery_id;
	char	   *tenant;			/* the provider account; "" for a single account */
	char	   *tenant_context;	/* Stripe's context, or NULL */
	bool		have_route;
	int32		route_id;
	int32		route_version;
	char	   *strategy;
	WiClassified found;			/* what the route read from the payload */

	IntakeStatus status;		/* the inbox row's status */
	char	   *reason;			/* why quarantined, ignored or refused */
	IntakeOutcome outcome;
	IntakeRefusal refusal;		/* why, when outcome is INTAKE_REFUSED */
	char	   *answer_reason;	/* the reason returned to the caller */
	bool		replayed;		/* body digest seen within the window */
} Row;

/* A growing array of Datums for one parameter of a set-based statement. */
typedef struct ArrBuild
{
	Datum	   *vals;
	bool	   *nulls;
	int			n;
} ArrBuild;

/* The rows a guarded step works on, and what it returns. */
typedef struct RowSet
{
	Row		   *rows;
	int		   *idx;
	int			n;
	int			result;
} RowSet;

/* intake_utils.c */
extern const char *intake_outcome_name(IntakeOutcome outcome);
extern const char *intake_status_name(IntakeStatus status);
extern int	intake_refusal_errcode(IntakeRefusal refusal);
extern void intake_refuse(Row *r, IntakeRefusal refusal, const char *fmt,...) pg_attribute_printf(3, 4);
extern const WiKindLayout *intake_layout_for(const char *kind);
extern char *intake_header_get(Row *r, const char *name);
extern char *intake_jsonb_path_text(void *body, const char *const *path);
extern char *intake_settings_text(Jsonb *settings, const char *key);
extern char *intake_truncate_reason(const char *prefix, const char *msg);
extern char *intake_clip_reason(char *r);
extern void intake_arr_init(ArrBuild *a, int cap);
extern void intake_arr_add(ArrBuild *a, Datum v, bool isnull);
extern void intake_arr_text(ArrBuild *a, const char *s);
extern Datum intake_arr_done(ArrBuild *a, Oid elemtype);
extern ErrorData *intake_in_subxact(void (*fn) (void *), void *arg);
extern bool intake_same_event(Row *x, Row *y);
extern bool intake_same_digest(Row *x, Row *y);
extern void intake_sort_by_event(Row *rows, int *idx, int n);
extern void intake_sort_by_digest(Row *rows, int *idx, int n);

/* intake_read.c */
extern void intake_read_ids(Row *r);
extern void intake_check_ids(Row *r);
extern void intake_read_tenant(Row *r);
extern bool intake_needs_route(Row *r);

/* intake_tenant.c */
extern bool intake_shopify_tenant(Row *r, const char *header, bool tenants);
extern bool intake_stripe_tenant_ok(Row *r, const char *account, const char *context);
extern char *intake_github_installation(Row *r);
extern void intake_tenant_prepare(void);
extern void intake_cap_tenants(Row *rows, int n);

/* intake_source.c */
extern void intake_source_prepare(void);
extern void intake_lookup_sources(Row *rows, char **names, int n);
extern void intake_refuse_replays(Row *rows, int *idx, int n);

/* intake_classify.c */
extern void intake_classify_prepare(void);
extern void intake_classify(Row *rows, int n);
extern void intake_decide_status(Row *r);

/* intake_write.c */
extern void intake_write_prepare(void);
extern bytea *intake_sha256_of(pg_cryptohash_ctx *ctx, bytea *body);
extern bool intake_write_inbox(Row *rows, int *idx, int n);
extern void intake_write_deliveries(Row *rows, int *idx, int n);
extern void intake_write_tenants(Row *rows, int *idx, int n);

#endif							/* WI_INTAKE_H */
