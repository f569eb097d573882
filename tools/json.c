/*
 * json.c
 *		Strict minimal JSON parser (see json.h).
 *
 * Numbers keep their raw text so ids and amounts survive exactly; strings are
 * decoded including \uXXXX escapes and surrogate pairs (to UTF-8).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"
#include "webhook_inbox_hex.h"

#define JV_MAX_DEPTH 64

typedef struct jparser
{
	const char *p;
	const char *end;
	char	   *err;
	size_t		errlen;
	int			failed;
} jparser;

static jv  *parse_value(jparser *ps, int depth);

static void
fail(jparser *ps, const char *msg)
{
	if (!ps->failed && ps->err && ps->errlen)
		snprintf(ps->err, ps->errlen, "%s", msg);
	ps->failed = 1;
}

static void
skip_ws(jparser *ps)
{
	while (ps->p < ps->end &&
		   (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static jv  *
new_jv(jv_type t)
{
	jv		   *v = xcalloc(1, sizeof(jv));

	v->type = t;
	return v;
}

void
jv_free(jv *v)
{
	size_t		i;

	if (v == NULL)
		return;
	for (i = 0; i < v->n; i++)
	{
		if (v->keys)
			free(v->keys[i]);
		jv_free(v->items[i]);
	}
	free(v->keys);
	free(v->items);
	free(v->str);
	free(v);
}

static int
read_hex4(jparser *ps, unsigned *out)
{
	unsigned	v = 0;
	int			i;

	if (ps->end - ps->p < 4)
		return -1;
	for (i = 0; i < 4; i++)
	{
		int			h = wi_hex_digit((unsigned char) ps->p[i]);

		if (h < 0)
			return -1;
		v = v * 16 + (unsigned) h;
	}
	ps->p += 4;
	*out = v;
	return 0;
}

static void
put_utf8(sbuf *sb, unsigned cp)
{
	char		b[4];

	if (cp < 0x80)
		sb_putc(sb, (char) cp);
	else if (cp < 0x800)
	{
		b[0] = (char) (0xC0 | (cp >> 6));
		b[1] = (char) (0x80 | (cp & 0x3F));
		sb_putn(sb, b, 2);
	}
	else if (cp < 0x10000)
	{
		b[0] = (char) (0xE0 | (cp >> 12));
		b[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
		b[2] = (char) (0x80 | (cp & 0x3F));
		sb_putn(sb, b, 3);
	}
	else
	{
		b[0] = (char) (0xF0 | (cp >> 18));
		b[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
		b[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
		b[3] = (char) (0x80 | (cp & 0x3F));
		sb_putn(sb, b, 4);
	}
}

/* Parse a string starting at the opening quote; returns 0 or -1. */
static int
parse_string(jparser *ps, char **out, size_t *outlen)
{
	sbuf		sb;

	sb_init(&sb);
	ps->p++;					/* opening quote */
	while (ps->p < ps->end && *ps->p != '"')
	{
		unsigned char c = (unsigned char) *ps->p;

		if (c < 0x20)
			goto err;
		if (c != '\\')
		{
			sb_putc(&sb, (char) c);
			ps->p++;
			continue;
		}
		ps->p++;
		if (ps->p >= ps->end)
			goto err;
		c = (unsigned char) *ps->p++;
		switch (c)
		{
			case '"':
			case '\\':
			case '/':
				sb_putc(&sb, (char) c);
				break;
			case 'b':
				sb_putc(&sb, '\b');
				break;
			case 'f':
				sb_putc(&sb, '\f');
				break;
			case 'n':
				sb_putc(&sb, '\n');
				break;
			case 'r':
				sb_putc(&sb, '\r');
				break;
			case 't':
				sb_putc(&sb, '\t');
				break;
			case 'u':
				{
					unsigned	cp,
								lo;

					if (read_hex4(ps, &cp) < 0)
						goto err;
					if (cp >= 0xD800 && cp <= 0xDBFF)
					{
						if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u')
							goto err;
						ps->p += 2;
						if (read_hex4(ps, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
							goto err;
						cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
					}
					else if (cp >= 0xDC00 && cp <= 0xDFFF)
						goto err;
					put_utf8(&sb, cp);
					break;
				}
			default:
				goto err;
		}
	}
	if (ps->p >= ps->end)
		goto err;
	ps->p++;					/* closing quote */
	*outlen = sb.len;
	*out = sb_steal(&sb);
	return 0;

err:
	sb_free(&sb);
	fail(ps, "invalid string");
	return -1;
}

static jv  *
parse_number(jparser *ps)
{
	const char *start = ps->p;
	jv		   *v;
	char	   *end;

	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	if (ps->p >= ps->end || !(*ps->p >= '0' && *ps->p <= '9'))
		goto err;
	if (*ps->p == '0')
		ps->p++;
	else
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
			ps->p++;
	if (ps->p < ps->end && *ps->p == '.')
	{
		ps->p++;
		if (ps->p >= ps->end || !(*ps->p >= '0' && *ps->p <= '9'))
			goto err;
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E'))
	{
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (ps->p >= ps->end || !(*ps->p >= '0' && *ps->p <= '9'))
			goto err;
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
			ps->p++;
	}
	v = new_jv(JV_NUM);
	v->slen = (size_t) (ps->p - start);
	v->str = xstrndup(start, v->slen);
	v->num = strtod(v->str, &end);
	return v;

err:
	fail(ps, "invalid number");
	return NULL;
}

static int
match_word(jparser *ps, const char *w)
{
	size_t		n = strlen(w);

	if ((size_t) (ps->end - ps->p) < n || memcmp(ps->p, w, n) != 0)
		return 0;
	ps->p += n;
	return 1;
}

static void
add_member(jv *v, char *key, jv *item)
{
	v->items = xrealloc(v->items, (v->n + 1) * sizeof(jv *));
	if (v->type == JV_OBJ)
	{
		v->keys = xrealloc(v->keys, (v->n + 1) * sizeof(char *));
		v->keys[v->n] = key;
	}
	v->items[v->n] = item;
	v->n++;
}

static jv  *
parse_container(jparser *ps, int depth, int is_obj)
{
	jv		   *v = new_jv(is_obj ? JV_OBJ : JV_ARR);
	char	   *key = NULL;
	size_t		keylen;

	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == (is_obj ? '}' : ']'))
	{
		ps->p++;
		return v;
	}
	for (;;)
	{
		jv		   *item;

		skip_ws(ps);
		if (is_obj)
		{
			if (ps->p >= ps->end || *ps->p != '"' ||
				parse_string(ps, &key, &keylen) < 0)
				goto err;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':')
				goto err;
			ps->p++;
		}
		item = parse_value(ps, depth + 1);
		if (item == NULL)
			goto err;
		add_member(v, key, item);
		key = NULL;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',')
		{
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == (is_obj ? '}' : ']'))
		{
			ps->p++;
			return v;
		}
		goto err;
	}

err:
	free(key);
	jv_free(v);
	fail(ps, is_obj ? "invalid object" : "invalid array");
	return NULL;
}

static jv  *
parse_value(jparser *ps, int depth)
{
	jv		   *v;

	if (depth > JV_MAX_DEPTH)
	{
		fail(ps, "nesting too deep");
		return NULL;
	}
	skip_ws(ps);
	if (ps->p >= ps->end)
	{
		fail(ps, "unexpected end of input");
		return NULL;
	}
	switch (*ps->p)
	{
		case '{':
			return parse_container(ps, depth, 1);
		case '[':
			return parse_container(ps, depth, 0);
		case '"':
			v = new_jv(JV_STR);
			if (parse_string(ps, &v->str, &v->slen) < 0)
			{
				jv_free(v);
				return NULL;
			}
			return v;
		case 't':
		case 'f':
			if (match_word(ps, "true") || match_word(ps, "false"))
			{
				v = new_jv(JV_BOOL);
				v->boolean = (ps->p[-1] == 'e' && ps->p[-2] == 'u');
				v->str = xstrdup(v->boolean ? "true" : "false");
				return v;
			}
			break;
		case 'n':
			if (match_word(ps, "null"))
				return new_jv(JV_NULL);
			break;
		default:
			return parse_number(ps);
	}
	fail(ps, "invalid literal");
	return NULL;
}

jv *
jv_parse(const char *text, size_t len, char *err, size_t errlen)
{
	jparser		ps;
	jv		   *v;

	ps.p = text;
	ps.end = text + len;
	ps.err = err;
	ps.errlen = errlen;
	ps.failed = 0;
	v = parse_value(&ps, 0);
	if (v == NULL)
		return NULL;
	skip_ws(&ps);
	if (ps.p != ps.end)
	{
		jv_free(v);
		fail(&ps, "trailing characters after JSON value");
		return NULL;
	}
	return v;
}

const jv *
jv_get(const jv *v, const char *key)
{
	size_t		i;

	if (v == NULL || v->type != JV_OBJ)
		return NULL;
	for (i = 0; i < v->n; i++)
		if (strcmp(v->keys[i], key) == 0)
			return v->items[i];
	return NULL;
}

const char *
jv_string(const jv *v)
{
	return (v && v->type == JV_STR) ? v->str : NULL;
}

const char *
jv_scalar_text(const jv *v)
{
	if (v == NULL)
		return NULL;
	if (v->type == JV_STR || v->type == JV_NUM || v->type == JV_BOOL)
		return v->str;
	return NULL;
}
