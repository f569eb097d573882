/*
 * intake_ids.c
 *		The id and type of a delivery, by its source's kind: the part of
 *		intake() that reads what the provider sent.
 *
 * Each kind is one row of a table (where its ids travel: headers, body key
 * paths, a suffix such as GitHub's action); an hmac source names its own
 * places in its settings.  Ids that travel in headers are read before the
 * body, so even an unreadable body is deduplicated by the provider's id.
 *
 * This file uses nothing of a running server (palloc, string and encoding
 * helpers that libpgcommon also has for frontend code), so it compiles into
 * the extension and, with FRONTEND defined, into the fuzz harness
 * extension/fuzz/fuzz_intake.c.  Results are palloc'd in the current memory
 * context or point into the caller's header values.
 */
#ifdef FRONTEND
#include "postgres_fe.h"
#else
#include "postgres.h"
#endif

#include "mb/pg_wchar.h"

#include "intake_ids.h"

/*
 * One row per kind of include/webhook_inbox_kinds.h, indexed by it.  Whether
 * a kind's ids are signed (a timestamp travels with them) is the list's fact,
 * not this table's: see wi_source_kind_timestamp().
 */
#define LAYOUT(name, ...) [WI_KIND_##name] = {WI_KIND_##name, __VA_ARGS__}
static const WiKindLayout kind_layouts[] = {
	LAYOUT(stripe, {NULL}, {"id"}, NULL, {{"type"}}, {NULL}, NULL),
	LAYOUT(standard, {"webhook-id", "svix-id"}, {NULL}, NULL, {{"type"}}, {NULL}, NULL),
	LAYOUT(shopify, {"x-shopify-webhook-id"}, {NULL}, "x-shopify-topic", {{NULL}}, {NULL},
		   "x-shopify-event-id"),
	LAYOUT(github, {"x-github-delivery"}, {NULL}, "x-github-event", {{NULL}}, {"action"}, NULL),
	LAYOUT(razorpay, {"x-razorpay-event-id"}, {NULL}, NULL, {{"event"}}, {NULL}, NULL),
	LAYOUT(slack, {NULL}, {"event_id"}, NULL, {{"event", "type"}, {"type"}}, {NULL}, NULL),
	LAYOUT(paddle, {NULL}, {"event_id"}, NULL, {{"event_type"}}, {NULL}, NULL),
	LAYOUT(checkout, {NULL}, {"id"}, NULL, {{"type"}}, {NULL}, NULL),
	/* hmac: its places come from the source's settings (WiIdPlaces) */
	LAYOUT(hmac, {NULL}, {NULL}, NULL, {{NULL}}, {NULL}, NULL),
};
#undef LAYOUT

StaticAssertDecl(lengthof(kind_layouts) == WI_NUM_SOURCE_KINDS,
				 "kind_layouts needs one row per kind of webhook_inbox_kinds.h");

/*
 * The layout of the kind called name, or NULL for a name that is no kind (or
 * a kind whose row is missing from the table, which a test would catch).
 */
const WiKindLayout *
wi_kind_layout(const char *kind)
{
	int			k = wi_source_kind_lookup(kind);

	if (k < 0 || (int) kind_layouts[k].kind != k)
		return NULL;
	return &kind_layouts[k];
}

/* Case-insensitive header lookup over the flat name/value arrays. */
char *
wi_header_get(char **names, char **values, int n, const char *name)
{
	if (name == NULL)
		return NULL;
	for (int i = 0; i < n; i++)
		if (names[i] != NULL && pg_strcasecmp(names[i], name) == 0)
			return values[i];
	return NULL;
}

/*
 * Split a dotted key path from an hmac source's settings ("data.id") into at
 * most WI_MAX_PATH_KEYS keys.  Returns false for an empty or too deep path.
 */
bool
wi_split_key_path(const char *dotted, const char **keys)
{
	char	   *copy;
	char	   *tok;
	char	   *save = NULL;
	int			n = 0;

	memset(keys, 0, sizeof(char *) * WI_MAX_PATH_KEYS);
	if (dotted == NULL || dotted[0] == '\0')
		return false;
	copy = pstrdup(dotted);
	for (tok = strtok_r(copy, ".", &save); tok != NULL; tok = strtok_r(NULL, ".", &save))
	{
		if (n == WI_MAX_PATH_KEYS)
			return false;
		keys[n++] = tok;
	}
	return n > 0;
}

/* The ids that travel in headers (before the body is even looked at). */
void
wi_ids_from_headers(const WiKindLayout *layout, const WiIdPlaces *places,
					char **names, char **values, int n, char **event_id, char **event_type)
{
	for (int i = 0; i < 3 && layout->id_headers[i] != NULL && *event_id == NULL; i++)
		*event_id = wi_header_get(names, values, n, layout->id_headers[i]);
	if (layout->type_header)
		*event_type = wi_header_get(names, values, n, layout->type_header);
	if (places != NULL && places->event_id_header)
		*event_id = wi_header_get(names, values, n, places->event_id_header);
	if (places != NULL && places->event_type_header)
		*event_type = wi_header_get(names, values, n, places->event_type_header);
}

/* Why the raw body cannot be JSON text at all, or NULL. */
const char *
wi_body_unreadable(const char *data, int len)
{
	if (memchr(data, '\0', len) != NULL)
		return "invalid_json: body contains a NUL byte";
	if (pg_encoding_verifymbstr(PG_UTF8, data, len) != len)
		return "invalid_utf8: body is not valid UTF-8";
	return NULL;
}

/* The ids the body holds, where the headers did not give them. */
void
wi_ids_from_body(const WiKindLayout *layout, const WiIdPlaces *places,
				 WiBodyText text, void *body, char **event_id, char **event_type)
{
	const char *path[WI_MAX_PATH_KEYS];

	if (*event_id == NULL && layout->id_path[0] != NULL)
		*event_id = text(body, layout->id_path);
	for (int i = 0; i < 2 && *event_type == NULL && layout->type_paths[i][0] != NULL; i++)
		*event_type = text(body, layout->type_paths[i]);
	if (places != NULL)
	{
		if (*event_id == NULL && wi_split_key_path(places->event_id_path, path))
			*event_id = text(body, path);
		if (*event_type == NULL && wi_split_key_path(places->event_type_path, path))
			*event_type = text(body, path);
	}
	if (*event_type != NULL && layout->type_suffix_path[0] != NULL)
	{
		char	   *suffix = text(body, layout->type_suffix_path);

		if (suffix)
			*event_type = psprintf("%s.%s", *event_type, suffix);
	}
}

/*
 * An empty id or type counts as none.  Returns why the delivery cannot be
 * identified (it is then kept in quarantine), or NULL.
 */
const char *
wi_ids_missing(char **event_id, char **event_type)
{
	if (*event_id != NULL && (*event_id)[0] == '\0')
		*event_id = NULL;
	if (*event_id == NULL)
		return "missing_event_id: no event id where this kind keeps it";
	if (*event_type == NULL || (*event_type)[0] == '\0')
	{
		*event_type = NULL;
		return "missing_event_type: no event type where this kind keeps it";
	}
	return NULL;
}
