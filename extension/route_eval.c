/*
 * route_eval.c
 *		A route's paths applied to a payload, for intake: the per-event part
 *		of _classify() and _classify_batch() (sql/core.sql), without a
 *		statement.
 *
 * Each path is what jsonb_path_query_first(payload, path) returns.  A lax
 * path of keys only ($.data.object.id, the shape of every preset's paths)
 * is walked through the payload's objects directly; any other path, or one
 * that meets an array on its way (lax mode would unwrap it), goes to
 * jsonb_path_query_first() itself.  What was found is then read as
 * _scalar_text(), _version_of() and _time_of() read it, by the same
 * input functions, so values and error messages are the same: an error
 * (a version that is not a timestamp, say) raises as it would in SQL, and
 * intake quarantines that event alone.
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonpath.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "route_eval.h"

/* What a path found: nothing, a scalar (in *v), or an object or array. */
typedef enum Found
{
	FOUND_NONE,
	FOUND_SCALAR,
	FOUND_CONTAINER
} Found;

/* jsonb_path_query_first(payload, path) through the jsonpath executor. */
static Found
path_first_executor(Jsonb *payload, Datum path, JsonbValue *v)
{
	static Jsonb *no_vars = NULL;
	LOCAL_FCINFO(fcinfo, 4);
	Datum		d;
	Jsonb	   *res;

	if (no_vars == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		no_vars = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));
		MemoryContextSwitchTo(old);
	}
	InitFunctionCallInfoData(*fcinfo, NULL, 4, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = JsonbPGetDatum(payload);
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = path;
	fcinfo->args[1].isnull = false;
	fcinfo->args[2].value = JsonbPGetDatum(no_vars);
	fcinfo->args[2].isnull = false;
	fcinfo->args[3].value = BoolGetDatum(false);	/* not silent, as in SQL */
	fcinfo->args[3].isnull = false;
	d = jsonb_path_query_first(fcinfo);
	if (fcinfo->isnull)
		return FOUND_NONE;
	res = DatumGetJsonbP(d);
	return JsonbExtractScalar(&res->root, v) ? FOUND_SCALAR : FOUND_CONTAINER;
}

/* The first item jsonb_path_query_first(payload, path) would return. */
static Found
path_first(Jsonb *payload, Datum pathd, JsonbValue *v)
{
	JsonPath   *jp = DatumGetJsonPathP(pathd);
	JsonPathItem item;
	JsonPathItem k;
	JsonbContainer *c;
	JsonbValue *cur;
	bool		more;

	if (!(jp->header & JSONPATH_LAX))
		return path_first_executor(payload, pathd, v);
	jspInit(&item, jp);
	if (item.type != jpiRoot)
		return path_first_executor(payload, pathd, v);
	/* only keys are walked: any other item may compute or raise, as the executor decides */
	k = item;
	while (jspGetNext(&k, &k))
		if (k.type != jpiKey)
			return path_first_executor(payload, pathd, v);

	if (JB_ROOT_IS_SCALAR(payload))
	{
		/* "$" is the scalar; a key of a scalar is nothing in lax mode */
		if (jspHasNext(&item))
			return FOUND_NONE;
		JsonbExtractScalar(&payload->root, v);
		return FOUND_SCALAR;
	}
	if (!jspHasNext(&item))
		return FOUND_CONTAINER;
	if (!JB_ROOT_IS_OBJECT(payload))
		return path_first_executor(payload, pathd, v);
	c = &payload->root;
	more = jspGetNext(&item, &item);
	while (more)
	{
		int32		len;
		char	   *key = jspGetString(&item, &len);

		cur = getKeyJsonValueFromContainer(c, key, len, v);
		if (cur == NULL)
			return FOUND_NONE;
		more = jspGetNext(&item, &item);
		if (cur->type != jbvBinary)
			return more ? FOUND_NONE : FOUND_SCALAR;
		if (!more)
			return FOUND_CONTAINER;
		if (!JsonContainerIsObject(cur->val.binary.data))
			return path_first_executor(payload, pathd, v);
		c = cur->val.binary.data;
	}
	return FOUND_NONE;			/* not reached */
}

/* _scalar_text(): the text of a string, number or boolean. */
static char *
scalar_text(Found f, JsonbValue *v)
{
	if (f != FOUND_SCALAR)
		return NULL;
	switch (v->type)
	{
		case jbvString:
			return pnstrdup(v->val.string.val, v->val.string.len);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
		case jbvBool:
			return pstrdup(v->val.boolean ? "true" : "false");
		default:
			return NULL;
	}
}

/*
 * _path_text(payload, path): _scalar_text(jsonb_path_query_first(payload,
 * path)) in one call.  The worker's statements read an occurrence's amount
 * and currency, and a fetched or listed object's status, with it: in SQL,
 * _scalar_text() is inlined and evaluates its argument twice, each time
 * through the jsonpath executor, where a path of keys needs one walk.
 */
PG_FUNCTION_INFO_V1(wi_path_text);
Datum
wi_path_text(PG_FUNCTION_ARGS)
{
	JsonbValue	v;
	char	   *s = scalar_text(path_first(PG_GETARG_JSONB_P(0), PG_GETARG_DATUM(1), &v), &v);

	if (s == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(s));
}

/* '^-?[0-9]+(\.[0-9]+)?$' (decimal true) or '^[0-9]+$' */
static bool
all_digits(const char *s, bool decimal)
{
	const char *p = s;

	if (decimal && *p == '-')
		p++;
	if (!isdigit((unsigned char) *p))
		return false;
	while (isdigit((unsigned char) *p))
		p++;
	if (decimal && *p == '.')
	{
		p++;
		if (!isdigit((unsigned char) *p))
			return false;
		while (isdigit((unsigned char) *p))
			p++;
	}
	return *p == '\0';
}

static Datum
timestamptz_of(const char *s)
{
	return DirectFunctionCall3(timestamptz_in, CStringGetDatum(s),
							   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
}

/* to_timestamp(text::float8) */
static Datum
epoch_to_timestamptz(const char *s)
{
	return DirectFunctionCall1(float8_timestamptz, DirectFunctionCall1(float8in, CStringGetDatum(s)));
}

/* _version_of(): numbers, numeric strings, timestamps as epoch seconds */
static Datum
version_of(Found f, JsonbValue *v, bool *isnull)
{
	char	   *s;

	*isnull = true;
	if (f != FOUND_SCALAR)
		return (Datum) 0;
	if (v->type == jbvNumeric)
	{
		*isnull = false;
		return NumericGetDatum(v->val.numeric);
	}
	if (v->type != jbvString)
		return (Datum) 0;
	s = pnstrdup(v->val.string.val, v->val.string.len);
	*isnull = false;
	if (all_digits(s, true))
		return DirectFunctionCall3(numeric_in, CStringGetDatum(s),
								   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	return DirectFunctionCall2(extract_timestamptz, CStringGetTextDatum("epoch"), timestamptz_of(s));
}

/* _time_of(): epoch seconds (a number or a string of digits) or a timestamp */
static Datum
time_of(Found f, JsonbValue *v, bool *isnull)
{
	char	   *s;

	*isnull = true;
	if (f != FOUND_SCALAR)
		return (Datum) 0;
	if (v->type == jbvNumeric)
	{
		*isnull = false;
		return epoch_to_timestamptz(DatumGetCString(DirectFunctionCall1(numeric_out,
																		NumericGetDatum(v->val.numeric))));
	}
	if (v->type != jbvString)
		return (Datum) 0;
	s = pnstrdup(v->val.string.val, v->val.string.len);
	*isnull = false;
	return all_digits(s, false) ? epoch_to_timestamptz(s) : timestamptz_of(s);
}

/*
 * _path_version(payload, path): _version_of(jsonb_path_query_first(payload,
 * path)) in one call, for the same reason as _path_text(): in SQL,
 * _version_of() is inlined and evaluates its argument up to seven times.
 * The save of fetched and listed objects and the order of a fetch's events
 * read versions with it.
 */
PG_FUNCTION_INFO_V1(wi_path_version);
Datum
wi_path_version(PG_FUNCTION_ARGS)
{
	JsonbValue	v;
	bool		isnull;
	Datum		d = version_of(path_first(PG_GETARG_JSONB_P(0), PG_GETARG_DATUM(1), &v), &v, &isnull);

	if (isnull)
		PG_RETURN_NULL();
	/* a number found in the payload points into it: the result is a copy */
	PG_RETURN_NUMERIC(DatumGetNumericCopy(d));
}

/*
 * wi_route_apply
 *		What route reads from payload, as _classify() reads it: every
 *		path first, then type, id, version, time and status.
 */
void
wi_route_apply(const WiRoute *route, Jsonb *payload, WiClassified *out)
{
	Found		f[WI_PATH_COUNT];
	JsonbValue	v[WI_PATH_COUNT];
	char	   *status;

	wi_classified_clear(out);
	if (route->ignore)
		return;
	for (int p = 0; p < WI_PATH_COUNT; p++)
		f[p] = route->has_path[p] ? path_first(payload, route->path[p], &v[p]) : FOUND_NONE;

	out->object_type = scalar_text(f[WI_PATH_TYPE], &v[WI_PATH_TYPE]);
	if (out->object_type == NULL && route->object_type != NULL)
		out->object_type = pstrdup(route->object_type);
	out->object_id = scalar_text(f[WI_PATH_ID], &v[WI_PATH_ID]);
	out->version = version_of(f[WI_PATH_VERSION], &v[WI_PATH_VERSION], &out->version_null);
	out->provider_time = time_of(f[WI_PATH_TIME], &v[WI_PATH_TIME], &out->time_null);
	status = scalar_text(f[WI_PATH_STATUS], &v[WI_PATH_STATUS]);
	if (status == NULL && route->tombstone)
		status = pstrdup("deleted");
	out->status_value = status;
}
