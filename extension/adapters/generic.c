/*
 * generic.c
 *		A read API described by the source's settings, for providers without
 *		an adapter of their own:
 *
 *		  fetch_url    "/objects/{type}/{id}" (relative to api_base, or absolute
 *		               on api_base's scheme, host and port: fetch.c refuses others)
 *		  list_url     "/objects/{type}?since={since}&after={cursor}"
 *		  auth_header  header name, default Authorization
 *		  auth_format  default "Bearer {token}"
 *		  unwrap_path, items_path, status_path, version_path  jsonpaths,
 *		               defaults $, $.data[*], $.status and none
 *		  types        object types with a read API (default: all)
 *
 * {since} is epoch seconds (0 for a full listing); {cursor} is the last id of the previous page
 * (empty on the first); a Link rel="next" header takes precedence.
 */
#include "postgres.h"

#include "provider.h"

static bool
generic_type_map(const WiSource *src, const char *object_type, WiTypeMap *out)
{
	if (src->types != NULL)
	{
		char	   *list = pstrdup(src->types);
		bool		found = false;

		for (char *tok = strtok(list, ","); tok && !found; tok = strtok(NULL, ","))
			found = strcmp(tok, object_type) == 0;
		if (!found)
			return false;
	}
	out->object_type = pstrdup(object_type);
	out->collection = out->object_type;
	out->unwrap_path = src->unwrap_path ? src->unwrap_path : "$";
	out->items_path = src->items_path ? src->items_path : "$.data[*]";
	out->status_path = src->status_path ? src->status_path : "$.status";
	out->version_path = src->version_path;
	out->occurrence = false;
	return true;
}

static char *
expand(const WiSource *src, const char *tmpl, const WiTypeMap *t, const char *id, int64 since,
	   const char *cursor)
{
	static const char *const keys[] = {"type", "id", "since", "cursor", NULL};
	const char *values[5];
	char	   *path;

	values[0] = wi_url_escape(t->collection);
	values[1] = id ? wi_url_escape(id) : "";
	values[2] = psprintf(INT64_FORMAT, since < 0 ? 0 : since);	/* 0: everything */
	values[3] = cursor ? wi_url_escape(cursor) : "";
	values[4] = NULL;
	path = wi_template(tmpl, keys, values);
	if (strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0)
		return path;
	return psprintf("%s%s%s", src->api_base, path[0] == '/' ? "" : "/", path);
}

static char *
generic_object_url(const WiSource *src, const WiTypeMap *t, const char *object_id)
{
	return src->fetch_url ? expand(src, src->fetch_url, t, object_id, 0, NULL) : NULL;
}

static char *
generic_list_url(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	/* a template without {cursor} cannot page by id: rely on Link headers */
	if (src->list_url == NULL || (cursor != NULL && strstr(src->list_url, "{cursor}") == NULL))
		return NULL;
	return expand(src, src->list_url, t, NULL, since_epoch, cursor);
}

static char *
generic_auth_header(const WiSource *src)
{
	static const char *const keys[] = {"token", NULL};
	const char *values[2] = {src->api_token, NULL};

	if (src->api_token == NULL)
		return NULL;
	return psprintf("%s: %s", src->auth_header ? src->auth_header : "Authorization",
					wi_template(src->auth_format ? src->auth_format : "Bearer {token}", keys, values));
}

const WiAdapter wi_adapter_generic = {
	.kind = "generic",
	.type_map = generic_type_map,
	.object_url = generic_object_url,
	.list_url = generic_list_url,
	.auth_header = generic_auth_header,
};
