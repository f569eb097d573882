/*
 * shopify_graphql_int.h
 *		What the simulator's Shopify GraphQL files share: the table of what
 *		is modelled, a parsed document, its errors and its validation
 *		(shopify_graphql_doc.c), used by shopify_graphql.c, which runs it.
 */
#ifndef SIM_SHOPIFY_GRAPHQL_INT_H
#define SIM_SHOPIFY_GRAPHQL_INT_H

#include "api_int.h"
#include "json.h"
#include "../extension/adapters/shopify_graphql.h"

#define GQL_MAX_DEPTH 12
#define GQL_MAX_ARGS 8
#define GQL_MAX_VARS 8
#define GQL_MAX_COST 1000		/* Shopify's single query limit */
typedef struct gql_fdef
{
	const char *type;
	const char *field;
	const char *returns;		/* a type of objects[] below, or a scalar/enum */
	int			list;			/* [returns!]! */
	const char *args;			/* "name:Type,..." the field accepts */
	const char *required;		/* the argument it needs, or NULL */
} gql_fdef;

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

typedef struct gql_error
{
	sbuf		json;			/* the errors array's members */
	int			n;
} gql_error;

typedef struct vctx
{
	gql_doc    *doc;
	const jv   *vars;			/* the request's variables object, or NULL */
	gql_error  *err;
	const char *path[GQL_MAX_DEPTH + 2];
	int			npath;
} vctx;

/* whether t is an object type of the table (else a scalar or enum) */
extern int	is_object_type(const char *t);
/* the table's field of type, or NULL */
extern const gql_fdef *field_def(const char *type, const char *field);
/* parse the document at p into d; -1 with the error in p */
extern int	parse_document(lexer *p, gql_doc *d);
extern void doc_free(gql_doc *d);
/* one error of Shopify's shape (message, locations, path, extensions) into e */
extern void add_error(gql_error *e, const char *message, int line, int col,
					  const char *const *path, int npath, const char *code,
					  const char *type_name, const char *field_name);
/* check parent's selections against type's fields, errors into v */
extern void validate_sel(vctx *v, const char *type, gql_field *parent);

#endif							/* SIM_SHOPIFY_GRAPHQL_INT_H */
