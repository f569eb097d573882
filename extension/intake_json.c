/*
 * intake_json.c
 *		The fast path from a delivery's body to its jsonb payload.
 *
 * Parsing the body is most of what intake spends per delivery after the
 * writes themselves.  PostgreSQL's own route (pg_parse_json with semantic
 * actions pushing into a JsonbParseState, as jsonb_in does) copies every
 * string character by character, duplicates every token and sorts each
 * object's keys through qsort_arg's indirect comparator.  Provider bodies
 * are plain: printable strings with few escapes, small objects.  This
 * reader builds the JsonbValue tree in one pass, pointing into the body's
 * bytes wherever a string has no escape, and sorts keys the way jsonb
 * orders them (length, then bytes; of equal keys the last one wins), so
 * JsonbValueToJsonb() makes the same jsonb that jsonb_in would.
 *
 * It accepts a strict subset of what PostgreSQL accepts and gives up,
 * returning NULL, on anything else: a syntax error, a \u escape that is not
 * printable ASCII, nesting beyond the limit, a number too long for
 * numeric_in's limits.  The caller then takes PostgreSQL's parser, which
 * either accepts the text too (with the same result) or says exactly what
 * is wrong.  So this file decides no outcome and writes no reason: it is
 * only faster where it is sure.
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "intake_json.h"

typedef struct Reader
{
	const char *p;				/* next byte */
	const char *end;
	int			depth;
	int			max_depth;
	int			max_digits;
	int			max_exp;
} Reader;

static bool read_value(Reader *rd, JsonbValue *out);

/* The characters PostgreSQL's lexer reads as part of one word or number. */
static inline bool
word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c >= '0' && c <= '9') || c == '_' || IS_HIGHBIT_SET(c);
}

static inline void
skip_space(Reader *rd)
{
	while (rd->p < rd->end &&
		   (*rd->p == ' ' || *rd->p == '\n' || *rd->p == '\r' || *rd->p == '\t'))
		rd->p++;
}

static inline int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * A string at rd->p (its opening quote).  Without escapes the value points
 * into the body; with them it is decoded into a new buffer.
 */
static bool
read_string(Reader *rd, JsonbValue *out)
{
	const char *s = ++rd->p;
	const char *q = s;
	const char *e;
	char	   *buf;
	int			n = 0;

	while (q < rd->end && *q != '"' && *q != '\\')
	{
		if ((unsigned char) *q < 0x20)
			return false;
		q++;
	}
	if (q >= rd->end)
		return false;
	out->type = jbvString;
	if (*q == '"')
	{
		out->val.string.val = (char *) s;
		out->val.string.len = q - s;
		rd->p = q + 1;
		return true;
	}

	/* escapes: find the closing quote first; decoding never lengthens */
	for (e = q; e < rd->end && *e != '"'; e += (*e == '\\') ? 2 : 1)
		;
	if (e >= rd->end)
		return false;
	buf = palloc(e - s + 1);
	memcpy(buf, s, q - s);
	n = q - s;
	while (q < rd->end && *q != '"')
	{
		char		c = *q++;

		if ((unsigned char) c < 0x20)
			return false;
		if (c != '\\')
		{
			buf[n++] = c;
			continue;
		}
		if (q >= rd->end)
			return false;
		switch (*q++)
		{
			case '"':
				buf[n++] = '"';
				break;
			case '\\':
				buf[n++] = '\\';
				break;
			case '/':
				buf[n++] = '/';
				break;
			case 'b':
				buf[n++] = '\b';
				break;
			case 'f':
				buf[n++] = '\f';
				break;
			case 'n':
				buf[n++] = '\n';
				break;
			case 'r':
				buf[n++] = '\r';
				break;
			case 't':
				buf[n++] = '\t';
				break;
			case 'u':
				{
					int			ch = 0;

					if (rd->end - q < 4)
						return false;
					for (int i = 0; i < 4; i++)
					{
						int			h = hex_value(q[i]);

						if (h < 0)
							return false;
						ch = ch * 16 + h;
					}
					q += 4;
					/* others (NUL, non-ASCII, surrogates) take the full parser */
					if (ch < 0x01 || ch > 0x7f)
						return false;
					buf[n++] = (char) ch;
					break;
				}
			default:
				return false;
		}
	}
	if (q >= rd->end)
		return false;
	out->val.string.val = buf;
	out->val.string.len = n;
	rd->p = q + 1;
	return true;
}

/*
 * A number, by JSON's grammar, within the limits that keep numeric_in from
 * raising (the same limits the full parser's scan applies).
 */
static bool
read_number(Reader *rd, JsonbValue *out)
{
	const char *s = rd->p;
	const char *q = s;
	int			digits = 0;
	long		exp = 0;
	char		tmp[64];
	char	   *tok;

	if (*q == '-')
		q++;
	if (q < rd->end && *q == '0')
		q++, digits++;
	else if (q < rd->end && *q >= '1' && *q <= '9')
		while (q < rd->end && *q >= '0' && *q <= '9')
			q++, digits++;
	else
		return false;
	if (q < rd->end && *q == '.')
	{
		q++;
		if (q >= rd->end || *q < '0' || *q > '9')
			return false;
		while (q < rd->end && *q >= '0' && *q <= '9')
			q++, digits++;
	}
	if (q < rd->end && (*q == 'e' || *q == 'E'))
	{
		q++;
		if (q < rd->end && (*q == '+' || *q == '-'))
			q++;
		if (q >= rd->end || *q < '0' || *q > '9')
			return false;
		while (q < rd->end && *q >= '0' && *q <= '9')
		{
			if (exp <= rd->max_exp)
				exp = exp * 10 + (*q - '0');
			q++;
		}
	}
	if ((q < rd->end && word_char(*q)) || digits > rd->max_digits || exp > rd->max_exp)
		return false;

	if (q - s < (long) sizeof(tmp))
		tok = tmp;
	else
		tok = palloc(q - s + 1);
	memcpy(tok, s, q - s);
	tok[q - s] = '\0';
	out->type = jbvNumeric;
	out->val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(tok),
														   ObjectIdGetDatum(InvalidOid),
														   Int32GetDatum(-1)));
	rd->p = q;
	return true;
}

static bool
read_word(Reader *rd, const char *word, int len)
{
	if (rd->end - rd->p < len || memcmp(rd->p, word, len) != 0 ||
		(rd->end - rd->p > len && word_char(rd->p[len])))
		return false;
	rd->p += len;
	return true;
}

/* jsonb's key order: shorter first, then by bytes; later duplicates first. */
static inline int
pair_cmp(const JsonbPair *x, const JsonbPair *y)
{
	int			c;

	if (x->key.val.string.len != y->key.val.string.len)
		return x->key.val.string.len < y->key.val.string.len ? -1 : 1;
	c = memcmp(x->key.val.string.val, y->key.val.string.val, x->key.val.string.len);
	if (c != 0)
		return c;
	return x->order > y->order ? -1 : 1;
}

static int
pair_ptr_cmp(const void *a, const void *b)
{
	return pair_cmp(*(JsonbPair *const *) a, *(JsonbPair *const *) b);
}

static inline bool
same_key(const JsonbPair *x, const JsonbPair *y)
{
	return x->key.val.string.len == y->key.val.string.len &&
		memcmp(x->key.val.string.val, y->key.val.string.val, x->key.val.string.len) == 0;
}

/*
 * Sort an object's pairs and keep the last of equal keys, as jsonb does.
 * Pointers are sorted, not the pairs (which are large): by insertion for
 * the small objects providers send, by qsort beyond that.
 */
static void
order_pairs(JsonbValue *obj)
{
	JsonbPair  *pairs = obj->val.object.pairs;
	int			n = obj->val.object.nPairs;
	JsonbPair **ptr;
	JsonbPair  *out;
	bool		sorted = true;
	int			w = 0;

	/* in order and distinct already (an equal key in order compares > 0) */
	for (int i = 1; i < n && sorted; i++)
		sorted = pair_cmp(&pairs[i - 1], &pairs[i]) < 0;
	if (sorted)
		return;
	ptr = palloc(sizeof(JsonbPair *) * n);
	for (int i = 0; i < n; i++)
		ptr[i] = &pairs[i];
	if (n <= 32)
	{
		for (int i = 1; i < n; i++)
		{
			JsonbPair  *p = ptr[i];
			int			j = i;

			for (; j > 0 && pair_cmp(ptr[j - 1], p) > 0; j--)
				ptr[j] = ptr[j - 1];
			ptr[j] = p;
		}
	}
	else
		qsort(ptr, n, sizeof(JsonbPair *), pair_ptr_cmp);
	out = palloc(sizeof(JsonbPair) * n);
	for (int i = 0; i < n; i++)
		if (w == 0 || !same_key(ptr[i], &out[w - 1]))
			out[w++] = *ptr[i];
	obj->val.object.pairs = out;
	obj->val.object.nPairs = w;
}

/*
 * Open a container at rd->p ('{' or '['): true with *empty set when it
 * closes right away.  Counts the nesting against the limit.
 */
static bool
open_container(Reader *rd, char close, bool *empty)
{
	if (++rd->depth > rd->max_depth)
		return false;
	rd->p++;
	skip_space(rd);
	*empty = rd->p < rd->end && *rd->p == close;
	if (*empty)
	{
		rd->p++;
		rd->depth--;
	}
	return true;
}

/*
 * After an item: 1 when a comma announces another, 0 when the container
 * closes (consumed), -1 for anything else.
 */
static int
next_item(Reader *rd, char close)
{
	skip_space(rd);
	if (rd->p < rd->end && *rd->p == ',')
	{
		rd->p++;
		skip_space(rd);
		return 1;
	}
	if (rd->p < rd->end && *rd->p == close)
	{
		rd->p++;
		rd->depth--;
		return 0;
	}
	return -1;
}

static bool
read_object(Reader *rd, JsonbValue *out)
{
	int			cap = 8;
	int			n = 0;
	int			more = 1;
	bool		empty;
	JsonbPair  *pairs = palloc(sizeof(JsonbPair) * cap);

	if (!open_container(rd, '}', &empty))
		return false;
	for (more = !empty; more > 0; more = next_item(rd, '}'))
	{
		if (n == cap)
			pairs = repalloc(pairs, sizeof(JsonbPair) * (cap *= 2));
		if (rd->p >= rd->end || *rd->p != '"' || !read_string(rd, &pairs[n].key))
			return false;
		skip_space(rd);
		if (rd->p >= rd->end || *rd->p != ':')
			return false;
		rd->p++;
		skip_space(rd);
		if (!read_value(rd, &pairs[n].value))
			return false;
		pairs[n].order = n;
		n++;
	}
	if (more < 0)
		return false;
	out->type = jbvObject;
	out->val.object.pairs = pairs;
	out->val.object.nPairs = n;
	order_pairs(out);
	return true;
}

static bool
read_array(Reader *rd, JsonbValue *out)
{
	int			cap = 8;
	int			n = 0;
	int			more = 1;
	bool		empty;
	JsonbValue *elems = palloc(sizeof(JsonbValue) * cap);

	if (!open_container(rd, ']', &empty))
		return false;
	for (more = !empty; more > 0; more = next_item(rd, ']'))
	{
		if (n == cap)
			elems = repalloc(elems, sizeof(JsonbValue) * (cap *= 2));
		if (!read_value(rd, &elems[n++]))
			return false;
	}
	if (more < 0)
		return false;
	out->type = jbvArray;
	out->val.array.elems = elems;
	out->val.array.nElems = n;
	out->val.array.rawScalar = false;
	return true;
}

static bool
read_value(Reader *rd, JsonbValue *out)
{
	if (rd->p >= rd->end)
		return false;
	switch (*rd->p)
	{
		case '{':
			return read_object(rd, out);
		case '[':
			return read_array(rd, out);
		case '"':
			return read_string(rd, out);
		case 't':
			out->type = jbvBool;
			out->val.boolean = true;
			return read_word(rd, "true", 4);
		case 'f':
			out->type = jbvBool;
			out->val.boolean = false;
			return read_word(rd, "false", 5);
		case 'n':
			out->type = jbvNull;
			return read_word(rd, "null", 4);
		default:
			return read_number(rd, out);
	}
}

/*
 * wi_json_fast
 *		The jsonb of the JSON text at data (len bytes, no NUL, valid in the
 *		database encoding), or NULL when the text is not on the fast path
 *		(see the file header).  Never raises for the text's content.
 *		Allocates in the current memory context; the result does not point
 *		into data.
 */
Jsonb *
wi_json_fast(const char *data, int len, int max_depth, int max_digits, int max_exp)
{
	Reader		rd = {data, data + len, 0, max_depth, max_digits, max_exp};
	JsonbValue	v;

	skip_space(&rd);
	if (!read_value(&rd, &v))
		return NULL;
	skip_space(&rd);
	if (rd.p != rd.end)
		return NULL;
	return JsonbValueToJsonb(&v);
}
