/*
 * shopify_graphql_doc.c
 *		The GraphQL side of the simulator's Shopify Admin API (see
 *		shopify_graphql.c's header): the table of what is modelled and
 *		GET /_sim/shopify/schema, the lexer and parser of a query document,
 *		Shopify's error shape, and the validation of a document against the
 *		table.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "shopify_graphql_int.h"

/* ---------- what is modelled ---------- */


static const gql_fdef schema[] = {
	{"QueryRoot", "order", "Order", 0, "id:ID!", "id"},
	{"QueryRoot", "orders", "OrderConnection", 0,
	"first:Int,after:String,last:Int,before:String,reverse:Boolean,sortKey:OrderSortKeys,query:String,savedSearchId:ID",
	NULL},
	{"QueryRoot", "currentAppInstallation", "AppInstallation", 0, "", NULL},
	{"AppInstallation", "id", "ID", 0, "", NULL},
	{"AppInstallation", "accessScopes", "AccessScope", 1, "", NULL},
	{"AccessScope", "handle", "String", 0, "", NULL},
	{"AccessScope", "description", "String", 0, "", NULL},
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
	"QueryRoot", "AppInstallation", "AccessScope", "Order", "MoneyBag", "MoneyV2", "OrderConnection", "OrderEdge", "PageInfo", NULL
};

int
is_object_type(const char *t)
{
	for (int i = 0; object_types[i]; i++)
		if (strcmp(object_types[i], t) == 0)
			return 1;
	return 0;
}

const gql_fdef *
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

int
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

void
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


/* path: the operation, then the field names down to the offending one */
void
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


static gql_var *
find_var(gql_doc *d, const char *name)
{
	for (int i = 0; i < d->nvars; i++)
		if (strcmp(d->vars[i].name, name) == 0)
			return &d->vars[i];
	return NULL;
}

void
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
