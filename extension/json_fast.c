/*
 * json_fast.c
 *		A delivery's payload in one pass over its body: a JSON reader that
 *		builds the JsonbValue tree directly, with each object's keys sorted
 *		and deduplicated the way jsonb does it (by length, then bytes; the
 *		last of equal keys wins), and hands it to JsonbValueToJsonb().
 *
 * It reads what webhook bodies are made of and gives up on anything else:
 * an error of any kind, a \u escape, a control character in a string,
 * nesting deeper than WI_JSON_MAX_DEPTH, a number beyond numeric's input
 * limits.  Then it returns NULL and intake parses the body with
 * PostgreSQL's own parser (wi_jsonb_parse(), at the end of this file),
 * which decides, and words the reason of a quarantine.  What it returns equals jsonb_in's value for the same text
 * (regress/sql/24_payload_parse.sql compares the two).
 *
 * Strings without escapes point into the body (convertToJsonb copies
 * them); a number goes to numeric_in, as in jsonb_in, but for a short
 * integer, whose numeric is built from an int64 (the same value to the
 * byte: no fraction digits either way).
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "json_fast.h"
#include "pg_compat.h"

typedef struct Reader
{
	const char *p;
	const char *end;
	int			depth;
} Reader;

static bool read_value(Reader *r, JsonbValue *out);

/*
 * Whether the JSON number at s (len bytes available) fits numeric's input
 * limits; sets *end past it.  This only bounds the digits and the
 * exponent, which numeric_in would raise about; the syntax is the
 * lexer's.
 */
bool
wi_json_number_in_range(const char *s, int len, int *end)
{
	int			i = 0;
	int			digits = 0;
	long		exp = 0;

	if (i < len && s[i] == '-')
		i++;
	while (i < len && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.'))
		digits += s[i++] != '.';
	if (i < len && (s[i] == 'e' || s[i] == 'E'))
	{
		i++;
		if (i < len && (s[i] == '+' || s[i] == '-'))
			i++;
		while (i < len && s[i] >= '0' && s[i] <= '9')
		{
			if (exp <= WI_JSON_MAX_NUM_EXP)
				exp = exp * 10 + (s[i] - '0');
			i++;
		}
	}
	*end = i;
	return digits <= WI_JSON_MAX_NUM_DIGITS && exp <= WI_JSON_MAX_NUM_EXP;
}

static inline void
skip_ws(Reader *r)
{
	while (r->p < r->end &&
		   (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
		r->p++;
}

/* After a number or a literal: the end, white space or punctuation. */
static inline bool
at_delimiter(const Reader *r)
{
	char		c;

	if (r->p >= r->end)
		return true;
	c = *r->p;
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' ||
		c == ',' || c == ']' || c == '}' || c == ':';
}

/* The string at r->p (its opening quote) into out. */
static bool
read_string(Reader *r, JsonbValue *out)
{
	const char *start = r->p + 1;
	const char *q = start;
	char	   *buf;
	char	   *w;

	while (q < r->end)
	{
		unsigned char c = (unsigned char) *q;

		if (c == '"')
		{
			out->type = jbvString;
			out->val.string.val = (char *) start;
			out->val.string.len = (int) (q - start);
			r->p = q + 1;
			return true;
		}
		if (c == '\\')
			break;
		if (c < 0x20)
			return false;
		q++;
	}
	if (q >= r->end)
		return false;

	/* escapes: find the end, then copy with them decoded */
	for (const char *e = q; e < r->end; e++)
	{
		unsigned char c = (unsigned char) *e;

		if (c < 0x20)
			return false;
		if (c == '\\')
		{
			if (++e >= r->end)
				return false;
			switch (*e)
			{
				case '"':
				case '\\':
				case '/':
				case 'b':
				case 'f':
				case 'n':
				case 'r':
				case 't':
					break;
				default:
					/* \u (and anything else) is the parser's */
					return false;
			}
			continue;
		}
		if (c != '"')
			continue;

		w = buf = palloc(e - start + 1);
		memcpy(w, start, q - start);
		w += q - start;
		while (q < e)
		{
			if (*q != '\\')
			{
				*w++ = *q++;
				continue;
			}
			q++;
			switch (*q++)
			{
				case 'b':
					*w++ = '\b';
					break;
				case 'f':
					*w++ = '\f';
					break;
				case 'n':
					*w++ = '\n';
					break;
				case 'r':
					*w++ = '\r';
					break;
				case 't':
					*w++ = '\t';
					break;
				default:
					*w++ = q[-1];	/* " \ / */
					break;
			}
		}
		out->type = jbvString;
		out->val.string.val = buf;
		out->val.string.len = (int) (w - buf);
		r->p = e + 1;
		return true;
	}
	return false;
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? at r->p, into a numeric. */
static bool
read_number(Reader *r, JsonbValue *out)
{
	const char *s = r->p;
	const char *q = s;
	int			end;
	char		small[64];
	char	   *text;
	bool		integer = true;

	if (q < r->end && *q == '-')
		q++;
	if (q >= r->end)
		return false;
	if (*q == '0')
		q++;
	else if (*q >= '1' && *q <= '9')
		while (q < r->end && *q >= '0' && *q <= '9')
			q++;
	else
		return false;
	if (q < r->end && *q == '.')
	{
		const char *f = ++q;

		integer = false;

		while (q < r->end && *q >= '0' && *q <= '9')
			q++;
		if (q == f)
			return false;
	}
	if (q < r->end && (*q == 'e' || *q == 'E'))
	{
		const char *x;

		integer = false;
		q++;
		if (q < r->end && (*q == '+' || *q == '-'))
			q++;
		x = q;
		while (q < r->end && *q >= '0' && *q <= '9')
			q++;
		if (q == x)
			return false;
	}
	r->p = q;
	if (!at_delimiter(r) ||
		!wi_json_number_in_range(s, (int) (q - s), &end))
		return false;

	out->type = jbvNumeric;
	if (integer && q - s <= 18 && !(q - s == 2 && s[0] == '-' && s[1] == '0'))
	{
		/* an integer of up to 18 characters: numeric_in's value, built from an int64 */
		int64		v = 0;
		bool		neg = *s == '-';

		for (const char *d = s + neg; d < q; d++)
			v = v * 10 + (*d - '0');
		out->val.numeric = int64_to_numeric(neg ? -v : v);
		return true;
	}
	text = q - s < (long) sizeof(small) ? small : palloc(q - s + 1);
	memcpy(text, s, q - s);
	text[q - s] = '\0';
	out->val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
														   CStringGetDatum(text),
														   ObjectIdGetDatum(InvalidOid),
														   Int32GetDatum(-1)));
	return true;
}

static bool
read_literal(Reader *r, const char *word, int n)
{
	if (r->end - r->p < n || memcmp(r->p, word, n) != 0)
		return false;
	r->p += n;
	return at_delimiter(r);
}

/* jsonb's key order: shorter first, then by bytes */
static inline int
key_cmp(const JsonbPair *a, const JsonbPair *b)
{
	if (a->key.val.string.len != b->key.val.string.len)
		return a->key.val.string.len > b->key.val.string.len ? 1 : -1;
	return memcmp(a->key.val.string.val, b->key.val.string.val, a->key.val.string.len);
}

/* The order of an object's pairs: by key, equal keys latest first */
static inline int
pair_cmp(const JsonbPair *a, const JsonbPair *b)
{
	int			res = key_cmp(a, b);

	if (res != 0)
		return res;
	return a->order > b->order ? -1 : 1;
}

/* sort_pairs(): PostgreSQL's quicksort with pair_cmp inlined */
#define ST_SORT sort_pairs
#define ST_ELEMENT_TYPE JsonbPair
#define ST_COMPARE(a, b) pair_cmp(a, b)
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/* Sort an object's pairs and keep the last of equal keys, as jsonb does. */
static int
order_pairs(JsonbPair *pairs, int n)
{
	int			kept = 0;

	sort_pairs(pairs, n);
	for (int i = 0; i < n; i++)
	{
		if (kept > 0 && key_cmp(&pairs[kept - 1], &pairs[i]) == 0)
			continue;
		if (kept != i)
			pairs[kept] = pairs[i];
		kept++;
	}
	return kept;
}

/*
 * After an item of a container closed by close: 1 when a comma leads to
 * the next item (white space after it skipped), 0 at the close, -1 for
 * anything else.
 */
static int
next_item(Reader *r, char close)
{
	skip_ws(r);
	if (r->p >= r->end)
		return -1;
	if (*r->p == close)
	{
		r->p++;
		return 0;
	}
	if (*r->p != ',')
		return -1;
	r->p++;
	skip_ws(r);
	return 1;
}

static bool
read_object(Reader *r, JsonbValue *out)
{
	int			n = 0;
	int			cap = 8;
	int			more;
	JsonbPair  *pairs;

	r->p++;
	skip_ws(r);
	pairs = palloc(sizeof(JsonbPair) * cap);
	if (r->p < r->end && *r->p == '}')
		r->p++;
	else
		for (;;)
		{
			if (r->p >= r->end || *r->p != '"')
				return false;
			if (n == cap)
			{
				cap *= 2;
				pairs = repalloc(pairs, sizeof(JsonbPair) * cap);
			}
			if (!read_string(r, &pairs[n].key))
				return false;
			pairs[n].order = n;
			skip_ws(r);
			if (r->p >= r->end || *r->p != ':')
				return false;
			r->p++;
			skip_ws(r);
			if (!read_value(r, &pairs[n].value))
				return false;
			n++;
			if ((more = next_item(r, '}')) <= 0)
			{
				if (more < 0)
					return false;
				break;
			}
		}
	out->type = jbvObject;
	out->val.object.nPairs = order_pairs(pairs, n);
	out->val.object.pairs = pairs;
	return true;
}

static bool
read_array(Reader *r, JsonbValue *out)
{
	int			n = 0;
	int			cap = 8;
	int			more;
	JsonbValue *elems;

	r->p++;
	skip_ws(r);
	elems = palloc(sizeof(JsonbValue) * cap);
	if (r->p < r->end && *r->p == ']')
		r->p++;
	else
		for (;;)
		{
			if (n == cap)
			{
				cap *= 2;
				elems = repalloc(elems, sizeof(JsonbValue) * cap);
			}
			if (!read_value(r, &elems[n]))
				return false;
			n++;
			if ((more = next_item(r, ']')) <= 0)
			{
				if (more < 0)
					return false;
				break;
			}
		}
	out->type = jbvArray;
	out->val.array.nElems = n;
	out->val.array.elems = elems;
	out->val.array.rawScalar = false;
	return true;
}

/* The value at r->p (white space before it already skipped). */
static bool
read_value(Reader *r, JsonbValue *out)
{
	bool		ok;

	if (r->p >= r->end)
		return false;
	switch (*r->p)
	{
		case '{':
		case '[':
			if (++r->depth > WI_JSON_MAX_DEPTH)
				return false;
			ok = *r->p == '{' ? read_object(r, out) : read_array(r, out);
			r->depth--;
			return ok;
		case '"':
			return read_string(r, out);
		case 't':
			out->type = jbvBool;
			out->val.boolean = true;
			return read_literal(r, "true", 4);
		case 'f':
			out->type = jbvBool;
			out->val.boolean = false;
			return read_literal(r, "false", 5);
		case 'n':
			out->type = jbvNull;
			return read_literal(r, "null", 4);
		default:
			return read_number(r, out);
	}
}

/*
 * wi_jsonb_fast
 *		The jsonb of the JSON text at data (len bytes), or NULL when this
 *		reader does not take it (see the file header); never raises for the
 *		text's content.
 */
Jsonb *
wi_jsonb_fast(const char *data, int len)
{
	Reader		r = {data, data + len, 0};
	JsonbValue	v;

	skip_ws(&r);
	if (!read_value(&r, &v))
		return NULL;
	skip_ws(&r);
	if (r.p != r.end)
		return NULL;
	return JsonbValueToJsonb(&v);
}

/* ---------------------------------------------------------------------
 * PostgreSQL's parser, for what the reader above gives up on
 * --------------------------------------------------------------------- */

/*
 * The payload is built during the one parse that validates it: the parser's
 * semantic actions push each token into a JsonbParseState, the way jsonb_in
 * does, but nothing in them raises for the body's content.  A body the
 * parser rejects leaves a half-built value that is simply dropped.
 */
typedef struct BuildState
{
	JsonbInState in;
	int			depth;			/* containers open */
	bool		in_array[WI_JSON_MAX_DEPTH + 2];	/* of each open container */
} BuildState;

static void
build_push(BuildState *b, JsonbIteratorToken tok, JsonbValue *v)
{
	pushJsonbValueCompat(&b->in, tok, v);
}

/* Opens a container: its kind is kept, for the scalars inside it. */
static void
build_open(BuildState *b, JsonbIteratorToken tok)
{
	build_push(b, tok, NULL);
	/* the scan before the parse bounded the nesting */
	if (++b->depth <= WI_JSON_MAX_DEPTH + 1)
		b->in_array[b->depth] = tok == WJB_BEGIN_ARRAY;
}

static void
build_close(BuildState *b, JsonbIteratorToken tok)
{
	build_push(b, tok, NULL);
	b->depth--;
}

static WiJsonAction
build_object_start(void *state)
{
	build_open((BuildState *) state, WJB_BEGIN_OBJECT);
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
build_object_end(void *state)
{
	build_close((BuildState *) state, WJB_END_OBJECT);
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
build_array_start(void *state)
{
	build_open((BuildState *) state, WJB_BEGIN_ARRAY);
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
build_array_end(void *state)
{
	build_close((BuildState *) state, WJB_END_ARRAY);
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
build_field(void *state, char *fname, bool isnull)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.len = strlen(fname);
	v.val.string.val = fname;
	build_push((BuildState *) state, WJB_KEY, &v);
	WI_JSON_ACTION_DONE;
}

/*
 * A scalar: an array element, an object's value, or the whole document (a
 * raw scalar, stored as a one-element array marked rawScalar).  Numbers
 * reach numeric_in only after parse_json's scan bounded their digits and exponent,
 * so it cannot raise.
 */
static WiJsonAction
build_scalar(void *state, char *token, JsonTokenType tokentype)
{
	BuildState *b = (BuildState *) state;
	JsonbValue	v;

	switch (tokentype)
	{
		case JSON_TOKEN_STRING:
			v.type = jbvString;
			v.val.string.len = strlen(token);
			v.val.string.val = token;
			break;
		case JSON_TOKEN_NUMBER:
			v.type = jbvNumeric;
			v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
																CStringGetDatum(token),
																ObjectIdGetDatum(InvalidOid),
																Int32GetDatum(-1)));
			break;
		case JSON_TOKEN_TRUE:
			v.type = jbvBool;
			v.val.boolean = true;
			break;
		case JSON_TOKEN_FALSE:
			v.type = jbvBool;
			v.val.boolean = false;
			break;
		default:
			v.type = jbvNull;
			break;
	}

	if (b->depth == 0)
	{
		JsonbValue	va;

		va.type = jbvArray;
		va.val.array.rawScalar = true;
		va.val.array.nElems = 1;
		build_push(b, WJB_BEGIN_ARRAY, &va);
		build_push(b, WJB_ELEM, &v);
		build_push(b, WJB_END_ARRAY, NULL);
	}
	else if (b->depth <= WI_JSON_MAX_DEPTH + 1 && b->in_array[b->depth])
		build_push(b, WJB_ELEM, &v);
	else
		build_push(b, WJB_VALUE, &v);
	WI_JSON_ACTION_DONE;
}

/*
 * wi_jsonb_parse
 *		The payload of the text at data (len bytes, in the database
 *		encoding), or NULL with *why set to the quarantine reason, decided
 *		without raising.  Intake calls it for what wi_jsonb_fast() does not
 *		take: errors, \u escapes, control characters, the limits below.
 *		The reason may be long (it quotes the offending token); the caller
 *		cuts it to length.  A structural scan first bounds what the parser's
 *		recursion and numeric_in would raise about (nesting, number sizes);
 *		then one pg_parse_json pass both validates the text (syntax and
 *		escape errors come back as codes) and builds the jsonb.
 */
Jsonb *
wi_jsonb_parse(char *data, int len, char **why)
{
	bool		in_string = false;
	int			depth = 0;
	JsonLexContext *lex;
	JsonParseErrorType err;
	JsonSemAction sem;
	BuildState	b;

	for (int i = 0; i < len; i++)
	{
		char		c = data[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (c == '"')
			in_string = true;
		else if (c == '[' || c == '{')
		{
			if (++depth > WI_JSON_MAX_DEPTH)
			{
				*why = psprintf("invalid_json: nested deeper than %d levels", WI_JSON_MAX_DEPTH);
				return NULL;
			}
		}
		else if (c == ']' || c == '}')
			depth--;
		else if (c == '-' || (c >= '0' && c <= '9'))
		{
			int			end;

			if (!wi_json_number_in_range(data + i, len - i, &end))
			{
				*why = psprintf("invalid_json: a number has more than %d digits or an exponent beyond %d",
								WI_JSON_MAX_NUM_DIGITS, WI_JSON_MAX_NUM_EXP);
				return NULL;
			}
			i += end - 1;
		}
	}

	memset(&b, 0, sizeof(b));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &b;
	sem.object_start = build_object_start;
	sem.object_end = build_object_end;
	sem.array_start = build_array_start;
	sem.array_end = build_array_end;
	sem.object_field_start = build_field;
	sem.scalar = build_scalar;

	lex = makeJsonLexContextCstringLenCompat(data, len, GetDatabaseEncoding(), true);
	err = pg_parse_json(lex, &sem);
	if (err != JSON_SUCCESS)
	{
		*why = psprintf("invalid_json: %s", json_errdetail(err, lex));
		return NULL;
	}
	return JsonbValueToJsonb(b.in.result);
}
