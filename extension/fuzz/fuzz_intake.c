/*
 * fuzz_intake.c
 *		libFuzzer harness for intake()'s reading of a delivery: the event id
 *		and type of each source kind from headers and body (intake_ids.c,
 *		the code intake() runs), with the body parsed by PostgreSQL's own JSON
 *		parser (common/jsonapi.c, the parser behind jsonb_in) from
 *		libpgcommon.  No server is needed.
 *
 * Input layout: byte 0 picks the source kind (and for "hmac" one of a few
 * settings), then "Name: value" lines up to an empty line are the headers,
 * and the rest is the body.  The harness checks that nothing crashes or
 * reads out of bounds (ASan/UBSan), and the contract intake() relies on: a
 * delivery either has a non-empty event id and type or a reason, a body
 * that the checks let through is UTF-8 without NUL, and an id from a
 * header is that header's value.
 */
#include "postgres_fe.h"

#include <stdint.h>

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

#include "intake_ids.h"
#include "pg_compat.h"

#define MAX_HEADERS 32

/* every kind of webhook_inbox_kinds.h, then hmac twice more with other places */
#define NKINDS (WI_NUM_SOURCE_KINDS + 2)

/* the places an hmac source may name in its settings */
static const WiIdPlaces hmac_places[3] = {
	{"x-event-id", "x-event-type", NULL, NULL},
	{NULL, NULL, "data.id", "event.kind"},
	{"x-event-id", NULL, "a.b.c.d", "a.b.c.d.e"},
};

/* ---------- the body as a small tree, built by jsonapi's callbacks ---------- */

typedef struct Node
{
	JsonTokenType type;			/* JSON_TOKEN_OBJECT_START for objects */
	char	   *key;			/* as a member of its parent object */
	char	   *text;			/* scalars */
	struct Node *first;
	struct Node *last;
	struct Node *next;
	struct Node *parent;
} Node;

typedef struct Builder
{
	Node	   *root;
	Node	   *cur;			/* the open object or array */
	char	   *key;			/* the member name waiting for its value */
	int			depth;
} Builder;

static Node *
add_node(Builder *b, JsonTokenType type)
{
	Node	   *n = palloc0(sizeof(Node));

	n->type = type;
	n->key = b->key;
	b->key = NULL;
	n->parent = b->cur;
	if (b->cur == NULL)
		b->root = n;
	else if (b->cur->last == NULL)
		b->cur->first = b->cur->last = n;
	else
		b->cur->last = b->cur->last->next = n;
	return n;
}

static WiJsonAction
on_object_start(void *state)
{
	Builder    *b = state;

	b->cur = add_node(b, JSON_TOKEN_OBJECT_START);
	b->depth++;
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
on_array_start(void *state)
{
	Builder    *b = state;

	b->cur = add_node(b, JSON_TOKEN_ARRAY_START);
	b->depth++;
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
on_end(void *state)
{
	Builder    *b = state;

	b->cur = b->cur->parent;
	b->depth--;
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
on_field(void *state, char *fname, bool isnull)
{
	Builder    *b = state;

	(void) isnull;
	b->key = fname;
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
on_scalar(void *state, char *token, JsonTokenType type)
{
	Builder    *b = state;
	Node	   *n = add_node(b, type);

	n->text = token;
	WI_JSON_ACTION_DONE;
}

/* the scalar's text at a key path, the last of duplicate keys winning (as in jsonb) */
static char *
tree_text(void *body, const char *const *path)
{
	Node	   *n = (Node *) body;

	if (n == NULL || n->type != JSON_TOKEN_OBJECT_START || path[0] == NULL)
		return NULL;
	for (int i = 0; i < WI_MAX_PATH_KEYS && path[i] != NULL; i++)
	{
		Node	   *found = NULL;

		if (n->type != JSON_TOKEN_OBJECT_START)
			return NULL;
		for (Node *c = n->first; c != NULL; c = c->next)
			if (c->key != NULL && strcmp(c->key, path[i]) == 0)
				found = c;
		if (found == NULL)
			return NULL;
		n = found;
	}
	switch (n->type)
	{
		case JSON_TOKEN_STRING:
		case JSON_TOKEN_NUMBER:
			return pstrdup(n->text);
		case JSON_TOKEN_TRUE:
			return pstrdup("true");
		case JSON_TOKEN_FALSE:
			return pstrdup("false");
		default:
			return NULL;
	}
}

/* frees a tree with its keys and scalars, without recursion (nesting may be deep) */
static void
free_tree(Node *n)
{
	while (n != NULL)
	{
		Node	   *next;

		if (n->first != NULL)
		{
			next = n->first;
			n->first = NULL;
			n = next;
			continue;
		}
		next = n->next != NULL ? n->next : n->parent;
		if (n->key)
			pfree(n->key);
		if (n->text)
			pfree(n->text);
		pfree(n);
		n = next;
	}
}

/*
 * The lexer's own allocations (17 has freeJsonLexContext(); before it, the
 * context and its string buffer are plain pallocs).
 */
static void
free_lex(JsonLexContext *lex)
{
#if PG17_LT
	if (lex->strval != NULL)
	{
		pfree(lex->strval->data);
		pfree(lex->strval);
	}
	pfree(lex);
#else
	freeJsonLexContext(lex);
#endif
}

static Node *
parse_body(const char *text, size_t len)
{
	JsonLexContext *lex = makeJsonLexContextCstringLenCompat((char *) text, (int) len, PG_UTF8, true);
	Builder		b = {NULL, NULL, NULL, 0};
	JsonSemAction sem;
	bool		ok;

	memset(&sem, 0, sizeof(sem));
	sem.semstate = &b;
	sem.object_start = on_object_start;
	sem.object_end = on_end;
	sem.array_start = on_array_start;
	sem.array_end = on_end;
	sem.object_field_start = on_field;
	sem.scalar = on_scalar;
	ok = pg_parse_json(lex, &sem) == JSON_SUCCESS;
	free_lex(lex);
	if (b.key != NULL)
		pfree(b.key);			/* a member name whose value never came */
	if (!ok)
	{
		free_tree(b.root);
		return NULL;
	}
	if (b.depth != 0)
		abort();				/* the parser accepted unbalanced input */
	return b.root;
}

/* ---------- one input ---------- */

static bool
in_headers(char **values, int n, const char *p)
{
	for (int i = 0; i < n; i++)
		if (values[i] == p)
			return true;
	return false;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const WiKindLayout *layout;
	const WiIdPlaces *places = NULL;
	char	   *names[MAX_HEADERS];
	char	   *values[MAX_HEADERS];
	int			nheaders = 0;
	char	   *buf;
	char	   *p;
	char	   *end;
	char	   *event_id = NULL;
	char	   *event_type = NULL;
	const char *why;
	char	   *body_id = NULL;
	char	   *body_type = NULL;
	Node	   *root = NULL;
	size_t		body_len;
	int			k;

	if (size < 1 || size > 65536)
		return 0;
	k = data[0] % NKINDS;
	layout = wi_kind_layout(wi_source_kind_name(k < WI_NUM_SOURCE_KINDS ? k : WI_KIND_hmac));
	if (layout == NULL)
		abort();
	if (k == WI_KIND_hmac)
		places = &hmac_places[0];
	else if (k >= WI_NUM_SOURCE_KINDS)
		places = &hmac_places[k - WI_NUM_SOURCE_KINDS + 1];

	/* a NUL-terminated copy: headers are C strings, the body is not */
	buf = palloc(size);
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	end = buf + size - 1;
	p = buf;
	while (p < end && nheaders < MAX_HEADERS)
	{
		char	   *eol = memchr(p, '\n', end - p);
		char	   *colon;

		if (eol == NULL || eol == p)
		{
			if (eol == p)
				p++;			/* the empty line: the body follows */
			break;
		}
		*eol = '\0';
		colon = strchr(p, ':');
		if (colon != NULL)
		{
			*colon = '\0';
			names[nheaders] = p;
			values[nheaders] = colon + 1 + (colon[1] == ' ');
			nheaders++;
		}
		p = eol + 1;
	}
	body_len = end - p;

	wi_ids_from_headers(layout, places, names, values, nheaders, &event_id, &event_type);
	if (event_id != NULL && !in_headers(values, nheaders, event_id))
		abort();				/* an id read before the body comes from a header */
	why = wi_body_unreadable(p, (int) body_len);
	if (why == NULL)
	{
		if (memchr(p, '\0', body_len) != NULL ||
			pg_encoding_verifymbstr(PG_UTF8, p, (int) body_len) != (int) body_len)
			abort();
		root = parse_body(p, body_len);
		if (root == NULL)
			why = "invalid_json";	/* jsonb_in would raise: intake quarantines */
		else
		{
			wi_ids_from_body(layout, places, tree_text, root, &event_id, &event_type);
			body_id = in_headers(values, nheaders, event_id) ? NULL : event_id;
			body_type = in_headers(values, nheaders, event_type) ? NULL : event_type;
			why = wi_ids_missing(&event_id, &event_type);
		}
	}
	if (why == NULL && (event_id == NULL || event_id[0] == '\0' ||
						event_type == NULL || event_type[0] == '\0'))
		abort();				/* identified means both, non-empty */
	if (why != NULL && why[0] == '\0')
		abort();

	/*
	 * What the harness allocated is freed, so that a run of any length stays
	 * small (the server frees with the memory context; here there is none).
	 * Left: the code under test's few intermediate strings per input.
	 */
	if (body_id)
		pfree(body_id);
	if (body_type)
		pfree(body_type);
	free_tree(root);
	pfree(buf);
	return 0;
}
