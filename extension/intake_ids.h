/*
 * intake_ids.h
 *		Where each source kind keeps a delivery's event id and type, and
 *		reading them from headers and body (intake_ids.c).
 *
 * Free of server state, so that the same code that intake() runs also
 * links into a standalone libFuzzer harness (extension/fuzz/): the body is
 * reached only through a callback that returns the text of the scalar at a
 * key path (jsonb in the server, PostgreSQL's own JSON parser in the
 * harness).
 */
#ifndef WI_INTAKE_IDS_H
#define WI_INTAKE_IDS_H

#include "webhook_inbox_kinds.h"

#define WI_MAX_PATH_KEYS	4

/*
 * Where a kind keeps its ids.  Header names are lowercase; body paths are
 * key paths from the top-level object.  The first present alternative wins.
 * Whether the ids are signed is the kind's timestamp fact in the list
 * (wi_source_kind_timestamp()): a kind that signs the body alone sends its
 * ids unsigned, so a replay is recognised by the body's digest.
 */
typedef struct WiKindLayout
{
	WiSourceKind kind;
	const char *id_headers[3];
	const char *id_path[WI_MAX_PATH_KEYS];
	const char *type_header;
	const char *type_paths[2][WI_MAX_PATH_KEYS];
	const char *type_suffix_path[WI_MAX_PATH_KEYS];	/* appended as ".value" */
	const char *correlation_header;
} WiKindLayout;

/* An hmac source's own places (its settings); NULL members are unset. */
typedef struct WiIdPlaces
{
	const char *event_id_header;
	const char *event_type_header;
	const char *event_id_path;	/* dotted: "data.id" */
	const char *event_type_path;
} WiIdPlaces;

/* Text of the scalar at a key path of the body's top-level object, or NULL. */
typedef char *(*WiBodyText) (void *body, const char *const *path);

extern const WiKindLayout *wi_kind_layout(const char *kind);
extern char *wi_header_get(char **names, char **values, int n, const char *name);
extern bool wi_split_key_path(const char *dotted, const char **keys);
extern void wi_ids_from_headers(const WiKindLayout *layout, const WiIdPlaces *places,
								char **names, char **values, int n,
								char **event_id, char **event_type);
extern const char *wi_body_unreadable(const char *data, int len);
extern void wi_ids_from_body(const WiKindLayout *layout, const WiIdPlaces *places,
							 WiBodyText text, void *body, char **event_id, char **event_type);
extern const char *wi_ids_missing(char **event_id, char **event_type);

#endif							/* WI_INTAKE_IDS_H */
