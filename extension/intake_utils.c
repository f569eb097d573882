/*
 * intake_utils.c
 *		What the parts of intake share: the source kinds' layouts, header and
 *		settings lookups, reasons cut to length, arrays for the set-based
 *		statements, subtransactions, and the orders rows are written in.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/jsonapi.h"
#include "common/sha2.h"
#include "common/string.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "intake.h"

/* ---------------------------------------------------------------------
 * Outcomes, statuses and refusals by name
 * --------------------------------------------------------------------- */

static const char *const outcome_names[INTAKE_OUTCOME__COUNT] = {
	[INTAKE_UNDECIDED] = NULL,
	[INTAKE_NEW] = "new",
	[INTAKE_DUPLICATE] = "duplicate",
	[INTAKE_QUARANTINED] = "quarantined",
	[INTAKE_REFUSED] = "refused",
};

static const char *const status_names[INTAKE_STATUS__COUNT] = {
	[INTAKE_STATUS_NONE] = NULL,
	[INTAKE_STATUS_PENDING] = "pending",
	[INTAKE_STATUS_IGNORED] = "ignored",
	[INTAKE_STATUS_QUARANTINED] = "quarantined",
};

/* A refusal's name (its reason's first word) and intake()'s errcode for it. */
static const struct
{
	const char *name;
	int			errcode;
}			refusals[INTAKE_REFUSE__COUNT] = {
	[INTAKE_REFUSE_MISSING_SOURCE] = {"missing_source", ERRCODE_NULL_VALUE_NOT_ALLOWED},
	[INTAKE_REFUSE_MISSING_BODY] = {"missing_body", ERRCODE_NULL_VALUE_NOT_ALLOWED},
	[INTAKE_REFUSE_MALFORMED_HEADERS] = {"malformed_headers", ERRCODE_NULL_VALUE_NOT_ALLOWED},
	[INTAKE_REFUSE_UNKNOWN_SOURCE] = {"unknown_source", ERRCODE_UNDEFINED_OBJECT},
	[INTAKE_REFUSE_SOURCE_DISABLED] = {"source_disabled", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE},
	[INTAKE_REFUSE_EVENT_ID_TOO_LONG] = {"event_id_too_long", ERRCODE_STRING_DATA_RIGHT_TRUNCATION},
	[INTAKE_REFUSE_EVENT_TYPE_TOO_LONG] = {"event_type_too_long", ERRCODE_STRING_DATA_RIGHT_TRUNCATION},
	[INTAKE_REFUSE_CORRELATION_ID_TOO_LONG] = {"correlation_id_too_long", ERRCODE_STRING_DATA_RIGHT_TRUNCATION},
	[INTAKE_REFUSE_TENANT_INVALID] = {"tenant_invalid", ERRCODE_STRING_DATA_RIGHT_TRUNCATION},
	[INTAKE_REFUSE_TENANT_MISMATCH] = {"tenant_mismatch", ERRCODE_INVALID_PARAMETER_VALUE},
};

/* The name SQL sees for an outcome; NULL while undecided. */
const char *
intake_outcome_name(IntakeOutcome outcome)
{
	Assert(outcome >= 0 && outcome < INTAKE_OUTCOME__COUNT);
	return outcome_names[outcome];
}

/* The inbox's name for a status; NULL while undecided. */
const char *
intake_status_name(IntakeStatus status)
{
	Assert(status >= 0 && status < INTAKE_STATUS__COUNT);
	return status_names[status];
}

/* The errcode intake() raises a refusal with. */
int
intake_refusal_errcode(IntakeRefusal refusal)
{
	Assert(refusal >= 0 && refusal < INTAKE_REFUSE__COUNT);
	return refusals[refusal].errcode;
}

/*
 * Refuse r: nothing of it is stored, and its reason is the refusal's name
 * and the detail fmt words.
 */
void
intake_refuse(Row *r, IntakeRefusal refusal, const char *fmt,...)
{
	StringInfoData buf;

	Assert(refusal >= 0 && refusal < INTAKE_REFUSE__COUNT);
	initStringInfo(&buf);
	appendStringInfo(&buf, "%s: ", refusals[refusal].name);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	r->outcome = INTAKE_REFUSED;
	r->refusal = refusal;
	r->answer_reason = buf.data;
}

const WiKindLayout *
intake_layout_for(const char *kind)
{
	const WiKindLayout *layout = wi_kind_layout(kind);

	if (layout == NULL)
		elog(ERROR, "webhook_inbox: no layout for kind \"%s\"", kind);
	return layout;
}

/* Case-insensitive header lookup over the row's name/value arrays. */
char *
intake_header_get(Row *r, const char *name)
{
	return wi_header_get(r->hnames, r->hvalues, r->nheaders, name);
}

/*
 * Text of the scalar at a key path of a JSON object, or NULL when a key is
 * missing, the value is null, or it is an object or array.
 */
char *
intake_jsonb_path_text(void *body, const char *const *path)
{
	Jsonb	   *jb = (Jsonb *) body;
	JsonbContainer *c = &jb->root;
	JsonbValue	v;
	JsonbValue *cur = NULL;

	if (path[0] == NULL || !JB_ROOT_IS_OBJECT(jb))
		return NULL;
	for (int i = 0; i < WI_MAX_PATH_KEYS && path[i] != NULL; i++)
	{
		cur = getKeyJsonValueFromContainer(c, path[i], strlen(path[i]), &v);
		if (cur == NULL)
			return NULL;
		if (i + 1 < WI_MAX_PATH_KEYS && path[i + 1] != NULL)
		{
			if (cur->type != jbvBinary || !JsonContainerIsObject(cur->val.binary.data))
				return NULL;
			c = cur->val.binary.data;
		}
	}
	switch (cur->type)
	{
		case jbvString:
			return pnstrdup(cur->val.string.val, cur->val.string.len);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out,
													   NumericGetDatum(cur->val.numeric)));
		case jbvBool:
			return pstrdup(cur->val.boolean ? "true" : "false");
		default:
			return NULL;
	}
}

char *
intake_settings_text(Jsonb *settings, const char *key)
{
	const char *path[WI_MAX_PATH_KEYS] = {key};

	return settings ? intake_jsonb_path_text(settings, path) : NULL;
}

/* The prefix and the message, cut to MAX_REASON_LEN bytes: a row's reason. */
char *
intake_truncate_reason(const char *prefix, const char *msg)
{
	return intake_clip_reason(psprintf("%s: %s", prefix, msg ? msg : "unknown error"));
}

/* r, cut in place to MAX_REASON_LEN bytes on a character boundary. */
char *
intake_clip_reason(char *r)
{
	if (strlen(r) > MAX_REASON_LEN)
		r[pg_mbcliplen(r, strlen(r), MAX_REASON_LEN)] = '\0';
	return r;
}
/* ---------------------------------------------------------------------
 * Arrays for the set-based statements
 * --------------------------------------------------------------------- */

void
intake_arr_init(ArrBuild *a, int cap)
{
	a->vals = palloc(sizeof(Datum) * Max(cap, 1));
	a->nulls = palloc(sizeof(bool) * Max(cap, 1));
	a->n = 0;
}

void
intake_arr_add(ArrBuild *a, Datum v, bool isnull)
{
	a->vals[a->n] = isnull ? (Datum) 0 : v;
	a->nulls[a->n] = isnull;
	a->n++;
}

void
intake_arr_text(ArrBuild *a, const char *s)
{
	intake_arr_add(a, s ? CStringGetTextDatum(s) : (Datum) 0, s == NULL);
}

Datum
intake_arr_done(ArrBuild *a, Oid elemtype)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			dims[1] = {a->n};
	int			lbs[1] = {1};

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_md_array(a->vals, a->nulls, 1, dims, lbs, elemtype,
											  typlen, typbyval, typalign));
}
/*
 * intake_in_subxact
 *		Run fn(arg) in a subtransaction.  Returns NULL when it returned, or,
 *		when it raised, the error (the subtransaction rolled back).
 */
ErrorData *
intake_in_subxact(void (*fn) (void *), void *arg)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_END_TRY();
	return edata;
}

/* ---------------------------------------------------------------------
 * Row order
 * --------------------------------------------------------------------- */

static Row *sort_rows;			/* qsort has no context argument */


static int
cmp_by_event(const void *a, const void *b)
{
	Row		   *x = &sort_rows[*(const int *) a];
	Row		   *y = &sort_rows[*(const int *) b];
	int			c;

	if (x->src->id != y->src->id)
		return x->src->id < y->src->id ? -1 : 1;
	c = strcmp(x->event_id, y->event_id);
	if (c != 0)
		return c;
	return x->ord - y->ord;
}

/* Whether x and y carry the same key, (source id, event id). */
bool
intake_same_event(Row *x, Row *y)
{
	return x->src->id == y->src->id && strcmp(x->event_id, y->event_id) == 0;
}

static int
cmp_by_digest(const void *a, const void *b)
{
	Row		   *x = &sort_rows[*(const int *) a];
	Row		   *y = &sort_rows[*(const int *) b];
	int			c;

	if (x->src->id != y->src->id)
		return x->src->id < y->src->id ? -1 : 1;
	c = memcmp(VARDATA(x->digest), VARDATA(y->digest), PG_SHA256_DIGEST_LENGTH);
	if (c != 0)
		return c;
	return x->ord - y->ord;
}

bool
intake_same_digest(Row *x, Row *y)
{
	return x->src->id == y->src->id &&
		memcmp(VARDATA(x->digest), VARDATA(y->digest), PG_SHA256_DIGEST_LENGTH) == 0;
}

/* Sort rows[idx[0..n-1]] by (source id, event id). */
void
intake_sort_by_event(Row *rows, int *idx, int n)
{
	sort_rows = rows;
	qsort(idx, n, sizeof(int), cmp_by_event);
}

/* Sort rows[idx[0..n-1]] by (source id, body digest). */
void
intake_sort_by_digest(Row *rows, int *idx, int n)
{
	sort_rows = rows;
	qsort(idx, n, sizeof(int), cmp_by_digest);
}
