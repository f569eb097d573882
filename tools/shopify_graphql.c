/*
 * shopify_graphql.c
 *		Shopify's GraphQL Admin API for orders, as strictly as the simulator
 *		can speak it: POST /admin/api/{version}/graphql.json with
 *		{"query", "variables", "operationName"}, QueryRoot.order(id:) and
 *		QueryRoot.orders(first:, after:, sortKey:, query:) with their
 *		connection (nodes, edges, pageInfo), and the cost extension of
 *		every answer with a leaky bucket (THROTTLED when a query costs more
 *		than is left).
 *
 * A query is parsed and validated before it runs, as GraphQL servers do:
 * a field its type does not have is answered with Shopify's error shape
 * ({"errors": [{"message": "Field 'x' doesn't exist on type 'Order'",
 * "locations", "path", "extensions": {"code": "undefinedField", ...}}]}),
 * so are unknown arguments, missing selections and undeclared or
 * mistyped variables.  Fields Shopify has and the simulator does not model
 * are answered as unknown ones: a client that needs one shows.  The table
 * of what is modelled (schema[] below) is served at /_sim/shopify/schema
 * and checked against Shopify's published Admin schema by the contract
 * test (regress/contract/shopify_graphql.mjs).
 *
 * Costs follow Shopify's calculation: scalars and enums 0, an object 1, a
 * connection 2 plus first times its node's cost; the requested cost is
 * taken from the bucket (after it refilled at the restore rate since the
 * last query), and a query that costs more than the bucket holds is
 * answered THROTTLED (HTTP 200) and costs nothing.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "api_int.h"
#include "json.h"
#include "sign.h"
#include "../extension/adapters/shopify_graphql.h"

#define GQL_MAX_DEPTH 12
#define GQL_MAX_ARGS 8
#define GQL_MAX_VARS 8
#define GQL_MAX_COST 1000		/* Shopify's single query limit */

/* ---------- what is modelled ---------- */

typedef struct gql_fdef
{
	const char *type;
	const char *field;
	const char *returns;		/* a type of objects[] below, or a scalar/enum */
	int			list;			/* [returns!]! */
	const char *args;			/* "name:Type,..." the field accepts */
	const char *required;		/* the argument it needs, or NULL */
} gql_fdef;

static const gql_fdef schema[] = {
	{"QueryRoot", "order", "Order", 0, "id:ID!", "id"},
	{"QueryRoot", "orders", "OrderConnection", 0,
	"first:Int,after:String,last:Int,before:String,reverse:Boolean,sortKey:OrderSortKeys,query:String,savedSearchId:ID",
	NULL},
	{"Order", "id", "ID", 0, "", NULL},
	{"Order", "legacyResourceId", "UnsignedInt64", 0, "", NULL},
	{"Order", "name", "String", 0, "", NULL},
	{"Order", "createdAt", "DateTime", 0, "", NULL},
	{"Order", "updatedAt", "DateTime", 0, "", NULL},
	{"Order", "displayFinancialStatus", "OrderDisplayFinancialStatus", 0, "", NULL},
	{"Order", "totalPriceSet", "MoneyBag", 0, "", NULL},
	{"Order", "currencyCode", "CurrencyCode", 0, "", NULL},
	{"Order", "cancelledAt", "DateTime", 0, "", NULL},
	{"Order", "closedAt", "DateTime", 0, "", NULL},
	{"MoneyBag", "shopMoney", "MoneyV2", 0, "", NULL},
	{"MoneyV2", "amount", "Decimal", 0, "", NULL},
	{"MoneyV2", "currencyCode", "CurrencyCode", 0, "", NULL},
	{"OrderConnection", "nodes", "Order", 1, "", NULL},
	{"OrderConnection", "edges", "OrderEdge", 1, "", NULL},
	{"OrderConnection", "pageInfo", "PageInfo", 0, "", NULL},
	{"OrderEdge", "cursor", "String", 0, "", NULL},
	{"OrderEdge", "node", "Order", 0, "", NULL},
	{"PageInfo", "hasNextPage", "Boolean", 0, "", NULL},
	{"PageInfo", "hasPreviousPage", "Boolean", 0, "", NULL},
	{"PageInfo", "startCursor", "String", 0, "", NULL},
	{"PageInfo", "endCursor", "String", 0, "", NULL},
};

static const char *const object_types[] = {
	"QueryRoot", "Order", "MoneyBag", "MoneyV2", "OrderConnection", "OrderEdge", "PageInfo", NULL
};

static int
is_object_type(const char *t)
{
	for (int i = 0; object_types[i]; i++)
		if (strcmp(object_types[i], t) == 0)
			return 1;
	return 0;
}

static const gql_fdef *
field_def(const char *type, const char *field)
{
	for (size_t i = 0; i < sizeof(schema) / sizeof(schema[0]); i++)
		if (strcmp(schema[i].type, type) == 0 && strcmp(schema[i].field, field) == 0)
			return &schema[i];
	return NULL;
}

/* The declared type of argument name of d ("ID!"), or NULL. */
static char *
arg_type(const gql_fdef *d, const char *name, char *buf, size_t len)
{
	const char *p = d->args;
	size_t		n = strlen(name);

	while (p && *p)
	{
		const char *colon = strchr(p, ':');
		const char *comma = strchr(p, ',');
		size_t		tl;

		if (colon == NULL)
			break;
		if (comma == NULL)
			comma = p + strlen(p);
		if ((size_t) (colon - p) == n && strncmp(p, name, n) == 0)
		{
			tl = (size_t) (comma - colon - 1);
			if (tl >= len)
				tl = len - 1;
			memcpy(buf, colon + 1, tl);
			buf[tl] = '\0';
			return buf;
		}
		p = *comma ? comma + 1 : comma;
	}
	return NULL;
}

void
shopify_graphql_schema(struct evhttp_request *req)
{
	sbuf		b;

	sb_init(&b);
	sb_puts(&b, "{\"fields\":[");
	for (size_t i = 0; i < sizeof(schema) / sizeof(schema[0]); i++)
	{
		if (i)
			sb_putc(&b, ',');
		sb_puts(&b, "{\"type\":");
		sb_json_str(&b, schema[i].type);
		sb_puts(&b, ",\"field\":");
		sb_json_str(&b, schema[i].field);
		sb_puts(&b, ",\"returns\":");
		sb_json_str(&b, schema[i].returns);
		sb_printf(&b, ",\"list\":%s,\"args\":", schema[i].list ? "true" : "false");
		sb_json_str(&b, schema[i].args);
		sb_putc(&b, '}');
	}
	sb_puts(&b, "]}");
	api_reply(req, 200, b.data);
	sb_free(&b);
}

/* ---------- the document ---------- */

typedef enum gv_kind
{
	GV_VAR, GV_STRING, GV_INT, GV_ENUM, GV_BOOL, GV_NULL
} gv_kind;

typedef struct gql_arg
{
	char	   *name;
	gv_kind		kind;
	char	   *text;			/* variable name, string, number, enum, true/false */
} gql_arg;

typedef struct gql_field
{
	char	   *alias;
	char	   *name;
	int			line,
				col;
	gql_arg		args[GQL_MAX_ARGS];
	int			nargs;
	int			has_sel;
	struct gql_field *sel;
	int			nsel;
} gql_field;

typedef struct gql_var
{
	char	   *name;
	char	   *type;
	int			used;
} gql_var;

typedef struct gql_doc
{
	char	   *op_name;		/* NULL: anonymous */
	gql_var		vars[GQL_MAX_VARS];
	int			nvars;
	gql_field	root;			/* QueryRoot's selection */
} gql_doc;

typedef struct lexer
{
	const char *s;
	size_t		i,
				n;
	int			line;
	size_t		line_start;
	char		err[300];
	int			err_line,
				err_col;
} lexer;

static int
col_of(lexer *p)
{
	return (int) (p->i - p->line_start) + 1;
}

static void
skip(lexer *p)
{
	while (p->i < p->n)
	{
		char		c = p->s[p->i];

		if (c == '\n')
		{
			p->i++;
			p->line++;
			p->line_start = p->i;
		}
		else if (c == ' ' || c == '\t' || c == '\r' || c == ',')
			p->i++;
		else if (c == '#')
		{
			while (p->i < p->n && p->s[p->i] != '\n')
				p->i++;
		}
		else
			break;
	}
}

static int
fail(lexer *p, const char *what)
{
	char		tok[32];
	size_t		k = 0;

	if (p->err[0])
		return -1;
	while (p->i + k < p->n && k < sizeof(tok) - 1 && !isspace((unsigned char) p->s[p->i + k]))
	{
		tok[k] = p->s[p->i + k];
		k++;
	}
	tok[k] = '\0';
	p->err_line = p->line;
	p->err_col = col_of(p);
	if (what)
		snprintf(p->err, sizeof(p->err), "%s at [%d, %d]", what, p->err_line, p->err_col);
	else
		snprintf(p->err, sizeof(p->err), "Parse error on \"%s\" at [%d, %d]", k ? tok : "end of query",
				 p->err_line, p->err_col);
	return -1;
}

static int
lex_accept(lexer *p, char c)
{
	skip(p);
	if (p->i < p->n && p->s[p->i] == c)
	{
		p->i++;
		return 1;
	}
	return 0;
}

static char *
read_name(lexer *p)
{
	size_t		start;

	skip(p);
	start = p->i;
	if (p->i >= p->n || !(isalpha((unsigned char) p->s[p->i]) || p->s[p->i] == '_'))
		return NULL;
	while (p->i < p->n && (isalnum((unsigned char) p->s[p->i]) || p->s[p->i] == '_'))
		p->i++;
	return xstrndup(p->s + start, p->i - start);
}

static char *
read_string(lexer *p)
{
	sbuf		b;

	sb_init(&b);
	p->i++;						/* the opening quote */
	while (p->i < p->n && p->s[p->i] != '"')
	{
		char		c = p->s[p->i++];

		if (c == '\n')
			break;
		if (c == '\\' && p->i < p->n)
		{
			c = p->s[p->i++];
			switch (c)
			{
				case 'n':
					c = '\n';
					break;
				case 't':
					c = '\t';
					break;
				case 'u':
					c = '?';
					p->i += p->i + 4 <= p->n ? 4 : 0;
					break;
				default:
					break;
			}
		}
		sb_putc(&b, c);
	}
	if (p->i >= p->n || p->s[p->i] != '"')
	{
		sb_free(&b);
		fail(p, "Unterminated string");
		return NULL;
	}
	p->i++;
	return sb_steal(&b);
}

static int
parse_value(lexer *p, gql_arg *a)
{
	char		c;

	skip(p);
	if (p->i >= p->n)
		return fail(p, NULL);
	c = p->s[p->i];
	if (c == '$')
	{
		p->i++;
		a->kind = GV_VAR;
		a->text = read_name(p);
		return a->text ? 0 : fail(p, NULL);
	}
	if (c == '"')
	{
		a->kind = GV_STRING;
		a->text = read_string(p);
		return a->text ? 0 : -1;
	}
	if (c == '-' || isdigit((unsigned char) c))
	{
		size_t		start = p->i++;

		while (p->i < p->n && (isdigit((unsigned char) p->s[p->i]) || p->s[p->i] == '.' ||
							   p->s[p->i] == 'e' || p->s[p->i] == 'E'))
			p->i++;
		a->kind = GV_INT;
		a->text = xstrndup(p->s + start, p->i - start);
		return 0;
	}
	if (c == '[' || c == '{')
		return fail(p, "webhook-sim does not model list or object literals");
	a->text = read_name(p);
	if (a->text == NULL)
		return fail(p, NULL);
	a->kind = strcmp(a->text, "true") == 0 || strcmp(a->text, "false") == 0 ? GV_BOOL :
		strcmp(a->text, "null") == 0 ? GV_NULL : GV_ENUM;
	return 0;
}

static int	parse_selection(lexer *p, gql_field *parent, int depth);

static int
parse_field(lexer *p, gql_field *f, int depth)
{
	char	   *name;

	skip(p);
	f->line = p->line;
	f->col = col_of(p);
	if (p->i + 2 < p->n && strncmp(p->s + p->i, "...", 3) == 0)
		return fail(p, "webhook-sim does not model fragments");
	name = read_name(p);
	if (name == NULL)
		return fail(p, NULL);
	if (lex_accept(p, ':'))
	{
		f->alias = name;
		f->name = read_name(p);
		if (f->name == NULL)
			return fail(p, NULL);
	}
	else
		f->name = name;
	if (lex_accept(p, '('))
	{
		while (!lex_accept(p, ')'))
		{
			gql_arg    *a;

			if (f->nargs == GQL_MAX_ARGS)
				return fail(p, "Too many arguments");
			a = &f->args[f->nargs++];
			a->name = read_name(p);
			if (a->name == NULL || !lex_accept(p, ':') || parse_value(p, a) != 0)
				return fail(p, NULL);
		}
	}
	skip(p);
	if (p->i < p->n && p->s[p->i] == '{')
		return parse_selection(p, f, depth + 1);
	return 0;
}

static int
parse_selection(lexer *p, gql_field *parent, int depth)
{
	if (depth > GQL_MAX_DEPTH)
		return fail(p, "Query has depth that exceeds webhook-sim's limit");
	if (!lex_accept(p, '{'))
		return fail(p, NULL);
	parent->has_sel = 1;
	while (!lex_accept(p, '}'))
	{
		if (p->i >= p->n)
			return fail(p, NULL);
		parent->sel = xrealloc(parent->sel, sizeof(gql_field) * (size_t) (parent->nsel + 1));
		memset(&parent->sel[parent->nsel], 0, sizeof(gql_field));
		if (parse_field(p, &parent->sel[parent->nsel++], depth) != 0)
			return -1;
	}
	return 0;
}

/* The variable definitions' type text: Name, [Type], with a trailing ! */
static char *
read_type(lexer *p)
{
	sbuf		b;
	char	   *name;

	sb_init(&b);
	if (lex_accept(p, '['))
	{
		char	   *inner = read_type(p);

		if (inner == NULL || !lex_accept(p, ']'))
		{
			free(inner);
			sb_free(&b);
			return NULL;
		}
		sb_printf(&b, "[%s]", inner);
		free(inner);
	}
	else if ((name = read_name(p)) != NULL)
	{
		sb_puts(&b, name);
		free(name);
	}
	else
	{
		sb_free(&b);
		return NULL;
	}
	if (lex_accept(p, '!'))
		sb_putc(&b, '!');
	return sb_steal(&b);
}

static int
parse_document(lexer *p, gql_doc *d)
{
	skip(p);
	if (p->i < p->n && p->s[p->i] != '{')
	{
		char	   *kw = read_name(p);

		if (kw == NULL || strcmp(kw, "query") != 0)
		{
			int			r = kw && (strcmp(kw, "mutation") == 0 || strcmp(kw, "subscription") == 0)
				? fail(p, "webhook-sim models queries only") : fail(p, NULL);

			free(kw);
			return r;
		}
		free(kw);
		d->op_name = read_name(p);
		if (lex_accept(p, '('))
		{
			while (!lex_accept(p, ')'))
			{
				gql_var    *v;

				if (d->nvars == GQL_MAX_VARS || !lex_accept(p, '$'))
					return fail(p, NULL);
				v = &d->vars[d->nvars++];
				v->name = read_name(p);
				if (v->name == NULL || !lex_accept(p, ':') || (v->type = read_type(p)) == NULL)
					return fail(p, NULL);
				if (lex_accept(p, '='))
					return fail(p, "webhook-sim does not model variable defaults");
			}
		}
	}
	if (parse_selection(p, &d->root, 0) != 0)
		return -1;
	skip(p);
	if (p->i < p->n)
		return fail(p, "webhook-sim answers one operation per document");
	return 0;
}

static void
field_free(gql_field *f)
{
	for (int i = 0; i < f->nsel; i++)
		field_free(&f->sel[i]);
	free(f->sel);
	free(f->alias);
	free(f->name);
	for (int i = 0; i < f->nargs; i++)
	{
		free(f->args[i].name);
		free(f->args[i].text);
	}
}

static void
doc_free(gql_doc *d)
{
	field_free(&d->root);
	free(d->op_name);
	for (int i = 0; i < d->nvars; i++)
	{
		free(d->vars[i].name);
		free(d->vars[i].type);
	}
}

/* ---------- errors ---------- */

typedef struct gql_error
{
	sbuf		json;			/* the errors array's members */
	int			n;
} gql_error;

/* path: the operation, then the field names down to the offending one */
static void
add_error(gql_error *e, const char *message, int line, int col, const char *const *path, int npath,
		  const char *code, const char *type_name, const char *field_name)
{
	if (e->n++)
		sb_putc(&e->json, ',');
	sb_puts(&e->json, "{\"message\":");
	sb_json_str(&e->json, message);
	if (line > 0)
		sb_printf(&e->json, ",\"locations\":[{\"line\":%d,\"column\":%d}]", line, col);
	if (npath > 0)
	{
		sb_puts(&e->json, ",\"path\":[");
		for (int i = 0; i < npath; i++)
		{
			if (i)
				sb_putc(&e->json, ',');
			sb_json_str(&e->json, path[i]);
		}
		sb_putc(&e->json, ']');
	}
	if (code)
	{
		sb_puts(&e->json, ",\"extensions\":{\"code\":");
		sb_json_str(&e->json, code);
		if (type_name)
		{
			sb_puts(&e->json, ",\"typeName\":");
			sb_json_str(&e->json, type_name);
		}
		if (field_name)
		{
			sb_puts(&e->json, ",\"fieldName\":");
			sb_json_str(&e->json, field_name);
		}
		sb_putc(&e->json, '}');
	}
	sb_putc(&e->json, '}');
}

/* ---------- validation ---------- */

typedef struct vctx
{
	gql_doc    *doc;
	const jv   *vars;			/* the request's variables object, or NULL */
	gql_error  *err;
	const char *path[GQL_MAX_DEPTH + 2];
	int			npath;
} vctx;

static gql_var *
find_var(gql_doc *d, const char *name)
{
	for (int i = 0; i < d->nvars; i++)
		if (strcmp(d->vars[i].name, name) == 0)
			return &d->vars[i];
	return NULL;
}

static void
validate_sel(vctx *v, const char *type, gql_field *parent)
{
	char		msg[400];

	for (int i = 0; i < parent->nsel; i++)
	{
		gql_field  *f = &parent->sel[i];
		const gql_fdef *d;

		v->path[v->npath++] = f->alias ? f->alias : f->name;
		if (strcmp(f->name, "__typename") == 0)
		{
			if (f->has_sel || f->nargs)
				add_error(v->err, "Selections can't be made on scalars (field '__typename' returns String)",
						  f->line, f->col, v->path, v->npath, "selectionMismatch", NULL, NULL);
			v->npath--;
			continue;
		}
		d = field_def(type, f->name);
		if (d == NULL)
		{
			snprintf(msg, sizeof(msg), "Field '%s' doesn't exist on type '%s'", f->name, type);
			add_error(v->err, msg, f->line, f->col, v->path, v->npath, "undefinedField", type, f->name);
			v->npath--;
			continue;
		}
		for (int k = 0; k < f->nargs; k++)
		{
			char		tbuf[64];
			const char *want = arg_type(d, f->args[k].name, tbuf, sizeof(tbuf));

			if (want == NULL)
			{
				snprintf(msg, sizeof(msg), "Field '%s' doesn't accept argument '%s'", f->name, f->args[k].name);
				add_error(v->err, msg, f->line, f->col, v->path, v->npath, "argumentNotAccepted",
						  "Field", f->name);
			}
			else if (f->args[k].kind == GV_VAR)
			{
				gql_var    *gv = find_var(v->doc, f->args[k].text);
				size_t		wl = strlen(want);
				int			want_nn = want[wl - 1] == '!';

				if (gv == NULL)
				{
					snprintf(msg, sizeof(msg), "Variable $%s is used by %s but not declared", f->args[k].text,
							 v->doc->op_name ? v->doc->op_name : "anonymous query");
					add_error(v->err, msg, f->line, f->col, v->path, v->npath, "variableNotDefined", NULL, NULL);
				}
				else
				{
					size_t		gl = strlen(gv->type);
					int			have_nn = gv->type[gl - 1] == '!';

					gv->used = 1;
					if ((gl - have_nn) != (wl - want_nn) || strncmp(gv->type, want, wl - want_nn) != 0 ||
						(want_nn && !have_nn))
					{
						snprintf(msg, sizeof(msg), "%s mismatch on variable $%s and argument %s (%s / %s)",
								 (gl - have_nn) == (wl - want_nn) && strncmp(gv->type, want, wl - want_nn) == 0
								 ? "Nullability" : "Type", gv->name, f->args[k].name, gv->type, want);
						add_error(v->err, msg, f->line, f->col, v->path, v->npath, "variableMismatch", NULL, NULL);
					}
				}
			}
		}
		if (d->required)
		{
			int			found = 0;

			for (int k = 0; k < f->nargs; k++)
				found |= strcmp(f->args[k].name, d->required) == 0;
			if (!found)
			{
				snprintf(msg, sizeof(msg), "Field '%s' is missing required arguments: %s", f->name, d->required);
				add_error(v->err, msg, f->line, f->col, v->path, v->npath, "missingRequiredArguments",
						  "Field", f->name);
			}
		}
		if (is_object_type(d->returns) && !f->has_sel)
		{
			snprintf(msg, sizeof(msg), "Field must have selections (field '%s' returns %s but has no selections. "
					 "Did you mean '%s { ... }'?)", f->name, d->returns, f->name);
			add_error(v->err, msg, f->line, f->col, v->path, v->npath, "selectionMismatch", NULL, NULL);
		}
		else if (!is_object_type(d->returns) && f->has_sel)
		{
			snprintf(msg, sizeof(msg), "Selections can't be made on scalars (field '%s' returns %s but has selections)",
					 f->name, d->returns);
			add_error(v->err, msg, f->line, f->col, v->path, v->npath, "selectionMismatch", NULL, NULL);
		}
		else if (f->has_sel && v->npath < GQL_MAX_DEPTH)
			validate_sel(v, d->returns, f);
		v->npath--;
	}
}

/* ---------- running it ---------- */

typedef struct order_page
{
	long	   *idx;			/* model indices of the page's orders */
	long		n;
	int			has_next;
	int			has_prev;
} order_page;

typedef struct rctx
{
	sim_api    *api;
	gql_doc    *doc;
	const jv   *vars;
	gql_error  *err;
	const char *path[GQL_MAX_DEPTH + 2];
	int			npath;
	int			sort_updated;	/* the page's sort: UPDATED_AT, else ID */
	double		cost;			/* actual */
} rctx;

/* An argument's value as text (a variable's from variables), or NULL for null/absent. */
static const char *
arg_text(rctx *r, gql_field *f, const char *name)
{
	for (int k = 0; k < f->nargs; k++)
		if (strcmp(f->args[k].name, name) == 0)
		{
			if (f->args[k].kind == GV_NULL)
				return NULL;
			if (f->args[k].kind == GV_VAR)
				return r->vars ? jv_scalar_text(jv_get(r->vars, f->args[k].text)) : NULL;
			return f->args[k].text;
		}
	return NULL;
}

static void
run_error(rctx *r, gql_field *f, const char *message, const char *code)
{
	add_error(r->err, message, f->line, f->col, r->path, r->npath, code, NULL, NULL);
}

/* Cursors are opaque to clients: base64 of "sort value:id", as Shopify's base64 JSON. */
static void
make_cursor(const sim_object *o, int sort_updated, char *out, size_t len)
{
	char		raw[96];
	char		enc[140];

	snprintf(raw, sizeof(raw), "%lld:%s", (long long) (sort_updated ? o->updated_at : 0), o->id);
	base64_encode((const unsigned char *) raw, strlen(raw), enc);
	snprintf(out, len, "%s", enc);
}

static int
parse_cursor(const char *c, int64_t *key, char *id, size_t idlen)
{
	unsigned char raw[128];
	int			n;
	long long	k;
	int			used = 0;

	if (strlen(c) > 160)
		return -1;
	n = base64_decode(c, strlen(c), raw);
	if (n <= 0 || n >= (int) sizeof(raw) - 1)
		return -1;
	raw[n] = '\0';
	if (sscanf((char *) raw, "%lld:%n", &k, &used) != 1 || used == 0 || raw[used] == '\0' ||
		strlen((char *) raw + used) >= idlen)
		return -1;
	*key = k;
	snprintf(id, idlen, "%s", (char *) raw + used);
	for (const char *p = id; *p; p++)
		if (!isdigit((unsigned char) *p))
			return -1;
	return 0;
}

static const sim_model *sort_model;
static int	sort_by_updated;

static int
cmp_orders(const void *a, const void *b)
{
	const sim_object *x = &sort_model->objs[*(const long *) a];
	const sim_object *y = &sort_model->objs[*(const long *) b];

	if (sort_by_updated && x->updated_at != y->updated_at)
		return x->updated_at < y->updated_at ? -1 : 1;
	return id_cmp(x->id, y->id);
}

/* search syntax: updated_at:>='ISO' or updated_at:>'ISO' (quotes optional); 0 or -1 */
static int
parse_search(const char *q, int64_t *min, int *strict)
{
	char		buf[80];
	size_t		n;
	const char *v;

	while (*q == ' ')
		q++;
	if (strncmp(q, "updated_at:>=", 13) == 0)
	{
		*strict = 0;
		v = q + 13;
	}
	else if (strncmp(q, "updated_at:>", 12) == 0)
	{
		*strict = 1;
		v = q + 12;
	}
	else
		return -1;
	n = strlen(v);
	while (n > 0 && v[n - 1] == ' ')
		n--;
	if (n >= 2 && (v[0] == '\'' || v[0] == '"') && v[n - 1] == v[0])
	{
		v++;
		n -= 2;
	}
	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, v, n);
	buf[n] = '\0';
	return parse_iso_time(buf, min);
}

/* Lists the orders page of orders(...): 0, or -1 with the error added. */
static int
list_orders(rctx *r, gql_field *f, order_page *pg, long *first_out)
{
	sim_model  *m = r->api->model;
	const char *v;
	int64_t		first = 0,
				min = INT64_MIN,
				ckey = 0;
	int			strict = 0;
	char		cid[SIM_ID_LEN] = "";
	long	   *all;
	long		nall = 0,
				start = 0;

	memset(pg, 0, sizeof(*pg));
	if (arg_text(r, f, "last") || arg_text(r, f, "before") || arg_text(r, f, "savedSearchId"))
	{
		run_error(r, f, "webhook-sim models forward paging only (first, after)", "notModelled");
		return -1;
	}
	if ((v = arg_text(r, f, "reverse")) != NULL && strcmp(v, "false") != 0)
	{
		run_error(r, f, "webhook-sim models reverse: false only", "notModelled");
		return -1;
	}
	if ((v = arg_text(r, f, "first")) == NULL)
	{
		run_error(r, f, "you must provide one of first or last", "BAD_REQUEST");
		return -1;
	}
	if (parse_int64(v, 0, INT64_MAX, &first) != 0 || first < 1 || first > 250)
	{
		run_error(r, f, "The first argument must be between 1 and 250", "BAD_REQUEST");
		return -1;
	}
	r->sort_updated = 0;
	if ((v = arg_text(r, f, "sortKey")) != NULL)
	{
		if (strcmp(v, "UPDATED_AT") == 0)
			r->sort_updated = 1;
		else if (strcmp(v, "ID") != 0)
		{
			run_error(r, f, "webhook-sim models sortKey UPDATED_AT and ID only", "notModelled");
			return -1;
		}
	}
	if ((v = arg_text(r, f, "query")) != NULL && *v && parse_search(v, &min, &strict) != 0)
	{
		run_error(r, f, "webhook-sim models the search terms updated_at:>='…' and updated_at:>'…' only",
				  "notModelled");
		return -1;
	}
	if ((v = arg_text(r, f, "after")) != NULL && parse_cursor(v, &ckey, cid, sizeof(cid)) != 0)
	{
		run_error(r, f, "Invalid cursor for current pagination sort.", "BAD_REQUEST");
		return -1;
	}
	all = xcalloc((size_t) m->nobjs + 1, sizeof(long));
	for (long k = 0; k < m->nobjs; k++)
	{
		const sim_object *o = &m->objs[k];

		if (o->type != OT_ORDER || !o->exists || o->deleted)
			continue;
		/* a shop's token lists that shop's orders only */
		if (shopify_request_shop > 0 && o->account != shopify_request_shop)
			continue;
		if (o->updated_at < min || (strict && o->updated_at == min))
			continue;
		all[nall++] = k;
	}
	sort_model = m;
	sort_by_updated = r->sort_updated;
	qsort(all, (size_t) nall, sizeof(long), cmp_orders);
	if (cid[0])
	{
		/* after the cursor's position in this sort */
		for (start = 0; start < nall; start++)
		{
			const sim_object *o = &m->objs[all[start]];
			int			c = r->sort_updated && o->updated_at != ckey ? (o->updated_at < ckey ? -1 : 1)
				: id_cmp(o->id, cid);

			if (c > 0)
				break;
		}
		pg->has_prev = start > 0;
	}
	pg->n = nall - start < first ? nall - start : (long) first;
	pg->idx = xcalloc((size_t) pg->n + 1, sizeof(long));
	memcpy(pg->idx, all + start, sizeof(long) * (size_t) pg->n);
	pg->has_next = start + pg->n < nall;
	*first_out = (long) first;
	free(all);
	return 0;
}

static void render_sel(rctx *r, sbuf *out, const char *type, const void *obj, gql_field *parent);

static void
render_money(sbuf *out, int64_t minor)
{
	sb_printf(out, "\"%lld.%02lld\"", (long long) (minor / 100), (long long) (minor % 100));
}

static void
render_time_or_null(sbuf *out, int set, int64_t t)
{
	char		iso[40];

	if (!set)
	{
		sb_puts(out, "null");
		return;
	}
	iso_time(t, 1, iso, sizeof(iso));
	sb_printf(out, "\"%s\"", iso);
}

/* One order field's value (Order, MoneyBag and MoneyV2 all stand on the order). */
static void
render_order_field(rctx *r, sbuf *out, const char *type, const sim_object *o, gql_field *f)
{
	const char *n = f->name;
	const char *st = obj_status_name(o);

	if (strcmp(type, "MoneyBag") == 0)
	{
		r->cost += 1;
		render_sel(r, out, "MoneyV2", o, f);
	}
	else if (strcmp(type, "MoneyV2") == 0)
	{
		if (strcmp(n, "amount") == 0)
			render_money(out, o->amount);
		else
			sb_printf(out, "\"%s\"", currency_name(o));
	}
	else if (strcmp(n, "id") == 0)
		sb_printf(out, "\"gid://shopify/Order/%s\"", o->id);
	else if (strcmp(n, "legacyResourceId") == 0)
		sb_printf(out, "\"%s\"", o->id);
	else if (strcmp(n, "name") == 0)
		sb_printf(out, "\"#%ld\"", o->number);
	else if (strcmp(n, "createdAt") == 0)
		render_time_or_null(out, 1, o->created);
	else if (strcmp(n, "updatedAt") == 0)
		render_time_or_null(out, 1, o->updated_at);
	else if (strcmp(n, "displayFinancialStatus") == 0)
	{
		sb_putc(out, '"');
		for (const char *p = st; *p; p++)
			sb_putc(out, (char) toupper((unsigned char) *p));
		sb_putc(out, '"');
	}
	else if (strcmp(n, "totalPriceSet") == 0)
	{
		r->cost += 1;
		render_sel(r, out, "MoneyBag", o, f);
	}
	else if (strcmp(n, "currencyCode") == 0)
		sb_printf(out, "\"%s\"", currency_name(o));
	else if (strcmp(n, "cancelledAt") == 0)
		render_time_or_null(out, strcmp(st, "voided") == 0, o->updated_at);
	else if (strcmp(n, "closedAt") == 0)
		sb_puts(out, "null");
	else
		sb_puts(out, "null");
}

static void
render_page(rctx *r, sbuf *out, const char *type, const order_page *pg, gql_field *f)
{
	sim_model  *m = r->api->model;
	char		cur[160];

	if (strcmp(f->name, "nodes") == 0 || strcmp(f->name, "edges") == 0)
	{
		int			edges = f->name[0] == 'e';

		sb_putc(out, '[');
		for (long i = 0; i < pg->n; i++)
		{
			if (i)
				sb_putc(out, ',');
			r->cost += 1;
			render_sel(r, out, edges ? "OrderEdge" : "Order", &m->objs[pg->idx[i]], f);
		}
		sb_putc(out, ']');
	}
	else if (strcmp(f->name, "pageInfo") == 0)
	{
		r->cost += 1;
		render_sel(r, out, "PageInfo", pg, f);
	}
	else if (strcmp(type, "PageInfo") == 0)
	{
		if (strcmp(f->name, "hasNextPage") == 0)
			sb_puts(out, pg->has_next ? "true" : "false");
		else if (strcmp(f->name, "hasPreviousPage") == 0)
			sb_puts(out, pg->has_prev ? "true" : "false");
		else if (pg->n == 0)
			sb_puts(out, "null");
		else
		{
			make_cursor(&m->objs[pg->idx[strcmp(f->name, "startCursor") == 0 ? 0 : pg->n - 1]],
						r->sort_updated, cur, sizeof(cur));
			sb_json_str(out, cur);
		}
	}
}

static void
render_root_field(rctx *r, sbuf *out, gql_field *f)
{
	sim_model  *m = r->api->model;

	if (strcmp(f->name, "order") == 0)
	{
		const char *gid = arg_text(r, f, "id");
		const char *pre = "gid://shopify/Order/";
		long		k = -1;
		char		msg[300];

		if (gid == NULL || strncmp(gid, "gid://shopify/", 14) != 0 || strchr(gid + 14, '/') == NULL)
		{
			snprintf(msg, sizeof(msg), "Invalid global id '%.200s'", gid ? gid : "");
			run_error(r, f, msg, "argumentLiteralsIncompatible");
			sb_puts(out, "null");
			return;
		}
		r->cost += 1;
		if (strncmp(gid, pre, strlen(pre)) == 0)
		{
			k = model_find_object(m, OT_ORDER, gid + strlen(pre));
			idmap_put(&r->api->fetches, gid + strlen(pre),
					  idmap_get(&r->api->fetches, gid + strlen(pre)) < 0 ? 1
					  : idmap_get(&r->api->fetches, gid + strlen(pre)) + 1);
		}
		if (k < 0 || m->objs[k].deleted || !m->objs[k].exists ||
			(shopify_request_shop > 0 && m->objs[k].account != shopify_request_shop))
			sb_puts(out, "null");
		else
			render_sel(r, out, "Order", &m->objs[k], f);
	}
	else if (strcmp(f->name, "orders") == 0)
	{
		order_page	pg;
		long		first;

		if (list_orders(r, f, &pg, &first) != 0)
		{
			sb_puts(out, "null");
			return;
		}
		r->api->lists++;
		r->cost += 2;
		render_sel(r, out, "OrderConnection", &pg, f);
		free(pg.idx);
	}
}

/*
 * Renders parent's selection on obj (of type) as a JSON object, each field
 * under its alias.  obj: NULL for QueryRoot, the order for Order, MoneyBag
 * and MoneyV2, the order of an OrderEdge, an order_page for the connection
 * and PageInfo.
 */
static void
render_sel(rctx *r, sbuf *out, const char *type, const void *obj, gql_field *parent)
{
	sb_putc(out, '{');
	for (int i = 0; i < parent->nsel; i++)
	{
		gql_field  *f = &parent->sel[i];

		if (i)
			sb_putc(out, ',');
		sb_json_str(out, f->alias ? f->alias : f->name);
		sb_putc(out, ':');
		r->path[r->npath++] = f->alias ? f->alias : f->name;
		if (strcmp(f->name, "__typename") == 0)
			sb_printf(out, "\"%s\"", type);
		else if (strcmp(type, "QueryRoot") == 0)
			render_root_field(r, out, f);
		else if (strcmp(type, "OrderConnection") == 0 || strcmp(type, "PageInfo") == 0)
			render_page(r, out, type, (const order_page *) obj, f);
		else if (strcmp(type, "OrderEdge") == 0)
		{
			if (strcmp(f->name, "cursor") == 0)
			{
				char		cur[160];

				make_cursor((const sim_object *) obj, r->sort_updated, cur, sizeof(cur));
				sb_json_str(out, cur);
			}
			else
				render_sel(r, out, "Order", obj, f);
		}
		else
			render_order_field(r, out, type, (const sim_object *) obj, f);
		r->npath--;
	}
	sb_putc(out, '}');
}

/*
 * The requested cost of parent's selection on type: an object 1, a
 * connection 2 plus its selection, in which each list field (nodes, edges)
 * costs `each` (the connection's first) times its element's cost.
 */
static double
requested_cost(rctx *r, const char *type, gql_field *parent, double each)
{
	double		c = 0;

	for (int i = 0; i < parent->nsel; i++)
	{
		gql_field  *f = &parent->sel[i];
		const gql_fdef *d = strcmp(f->name, "__typename") == 0 ? NULL : field_def(type, f->name);

		if (d == NULL || !is_object_type(d->returns))
			continue;
		if (strcmp(d->returns, "OrderConnection") == 0)
		{
			const char *v = arg_text(r, f, "first");
			int64_t		first = 0;

			if (v == NULL || parse_int64(v, 0, 100000, &first) != 0)
				first = 0;
			c += 2 + requested_cost(r, d->returns, f, (double) first);
		}
		else if (d->list)
			c += each * (1 + requested_cost(r, d->returns, f, 0));
		else
			c += 1 + requested_cost(r, d->returns, f, 0);
	}
	return c;
}

static void
cost_extension(sbuf *out, double requested, double actual, int have_actual, const sim_api *api)
{
	sb_printf(out, "\"extensions\":{\"cost\":{\"requestedQueryCost\":%.0f,\"actualQueryCost\":", requested);
	if (have_actual)
		sb_printf(out, "%.0f", actual);
	else
		sb_puts(out, "null");
	sb_printf(out, ",\"throttleStatus\":{\"maximumAvailable\":%.1f,\"currentlyAvailable\":%.0f,"
			  "\"restoreRate\":%.1f}}}", api->gql_max, api->gql_level, api->gql_rate);
}

static void
reply_errors(struct evhttp_request *req, gql_error *e, const char *cost_json)
{
	sbuf		b;

	sb_init(&b);
	sb_puts(&b, "{\"errors\":[");
	sb_puts(&b, e->json.data ? e->json.data : "");
	sb_putc(&b, ']');
	if (cost_json)
	{
		sb_putc(&b, ',');
		sb_puts(&b, cost_json);
	}
	sb_putc(&b, '}');
	api_reply(req, 200, b.data);
	sb_free(&b);
}

void
shopify_graphql_handle(sim_api *api, struct evhttp_request *req, const char *version)
{
	size_t		len;
	char	   *body = api_request_body(req, &len);
	char		jerr[200];
	jv		   *in = NULL;
	const char *query;
	const jv   *vars;
	gql_doc		doc;
	lexer		lx;
	gql_error	err;
	vctx		vc;
	rctx		rc;
	sbuf		out,
				cost;
	double		requested,
				now;
	char		opname[140];
	const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");

	memset(&doc, 0, sizeof(doc));
	memset(&err, 0, sizeof(err));
	sb_init(&err.json);
	sb_init(&out);
	sb_init(&cost);
	evhttp_add_header(evhttp_request_get_output_headers(req), "X-Shopify-API-Version", version);

	if (ctype == NULL || strncmp(ctype, "application/json", 16) != 0)
	{
		api_reply(req, 415, "{\"errors\":\"Unsupported Media Type: send application/json\"}");
		goto done;
	}
	in = jv_parse(body ? body : "", len, jerr, sizeof(jerr));
	query = jv_string(jv_get(in, "query"));
	vars = jv_get(in, "variables");
	if (in == NULL || in->type != JV_OBJ || query == NULL ||
		(vars != NULL && vars->type != JV_OBJ && vars->type != JV_NULL))
	{
		api_reply(req, 400, "{\"errors\":{\"query\":\"Required parameter missing or invalid\"}}");
		goto done;
	}
	if (vars != NULL && vars->type == JV_NULL)
		vars = NULL;

	memset(&lx, 0, sizeof(lx));
	lx.s = query;
	lx.n = strlen(query);
	lx.line = 1;
	if (parse_document(&lx, &doc) != 0)
	{
		add_error(&err, lx.err, lx.err_line, lx.err_col, NULL, 0, NULL, NULL, NULL);
		reply_errors(req, &err, NULL);
		goto done;
	}

	/* validation: the whole document, before anything runs or costs */
	snprintf(opname, sizeof(opname), "query%s%.120s", doc.op_name ? " " : "", doc.op_name ? doc.op_name : "");
	memset(&vc, 0, sizeof(vc));
	vc.doc = &doc;
	vc.vars = vars;
	vc.err = &err;
	vc.path[vc.npath++] = opname;
	validate_sel(&vc, "QueryRoot", &doc.root);
	for (int i = 0; i < doc.nvars; i++)
		if (!doc.vars[i].used)
		{
			char		msg[300];

			snprintf(msg, sizeof(msg), "Variable $%s is declared by %s but not used", doc.vars[i].name,
					 doc.op_name ? doc.op_name : "anonymous query");
			add_error(&err, msg, 1, 1, vc.path, 1, "variableNotUsed", NULL, NULL);
		}
	if (err.n > 0)
	{
		reply_errors(req, &err, NULL);
		goto done;
	}

	/* the bucket: refilled since the last query, then asked for the requested cost */
	memset(&rc, 0, sizeof(rc));
	rc.api = api;
	rc.doc = &doc;
	rc.vars = vars;
	rc.err = &err;
	rc.path[rc.npath++] = opname;
	requested = requested_cost(&rc, "QueryRoot", &doc.root, 1);
	now = now_monotonic();
	api->gql_level += (now - api->gql_at) * api->gql_rate;
	if (api->gql_level > api->gql_max)
		api->gql_level = api->gql_max;
	api->gql_at = now;
	if (requested > GQL_MAX_COST)
	{
		char		msg[200];

		snprintf(msg, sizeof(msg), "Query cost is %.0f, which exceeds the single query max cost limit (%d).",
				 requested, GQL_MAX_COST);
		add_error(&err, msg, 0, 0, NULL, 0, "MAX_COST_EXCEEDED", NULL, NULL);
		cost_extension(&cost, requested, 0, 0, api);
		reply_errors(req, &err, cost.data);
		goto done;
	}
	if (requested > api->gql_level)
	{
		api->gql_throttled++;
		add_error(&err, "Throttled", 0, 0, NULL, 0, "THROTTLED", NULL, NULL);
		cost_extension(&cost, requested, 0, 0, api);
		reply_errors(req, &err, cost.data);
		goto done;
	}

	sb_puts(&out, "{\"data\":");
	render_sel(&rc, &out, "QueryRoot", NULL, &doc.root);
	/* what the query cost in the end is taken; the rest of the request is refunded */
	api->gql_level -= rc.cost < requested ? rc.cost : requested;
	if (err.n > 0)
	{
		cost_extension(&cost, requested, rc.cost, 1, api);
		reply_errors(req, &err, cost.data);
		goto done;
	}
	sb_putc(&out, ',');
	cost_extension(&out, requested, rc.cost, 1, api);
	sb_putc(&out, '}');
	api_reply(req, 200, out.data);

done:
	doc_free(&doc);
	if (in)
		jv_free(in);
	free(body);
	sb_free(&err.json);
	sb_free(&out);
	sb_free(&cost);
}
