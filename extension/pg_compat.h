/*
 * pg_compat.h
 *		Where the PostgreSQL majors this extension builds against differ, in
 *		one place: one block per changed API, in alphabetical order, each
 *		naming the upstream change.  The code is written against the newest
 *		form of each API (or a name of ours where the forms cannot meet), and
 *		the blocks map it onto the older majors.
 *
 * Supported: 15 to 18, tested on 15, 17 and 18; 19, guards written only
 * where its release notes and headers name a change to an API this code
 * uses, neither built nor tested yet (its source was not reachable).  A major beyond 19 still builds
 * where its APIs did not move, but the direct writer (bulk.c) is not
 * trusted there: WI_BULK_EXECUTOR_KNOWN is false, and every write runs its
 * statement, which is correct everywhere, only slower.
 *
 * Include it after postgres.h (or postgres_fe.h: the JSON and base64 blocks
 * serve the fuzz harness too).  It includes nothing of its own but varatt.h
 * on 16 and later: each block is a macro or a typedef over a tag, resolved
 * where it is used, in files that include the headers they call.
 */
#ifndef WI_PG_COMPAT_H
#define WI_PG_COMPAT_H

#define PG16_LT (PG_VERSION_NUM < 160000)
#define PG16_GE (PG_VERSION_NUM >= 160000)
#define PG17_LT (PG_VERSION_NUM < 170000)
#define PG17_GE (PG_VERSION_NUM >= 170000)
#define PG18_LT (PG_VERSION_NUM < 180000)
#define PG18_GE (PG_VERSION_NUM >= 180000)
#define PG19_LT (PG_VERSION_NUM < 190000)
#define PG19_GE (PG_VERSION_NUM >= 190000)

#if PG_VERSION_NUM < 150000
#error "webhook_inbox needs PostgreSQL 15 or later"
#endif

/* The majors whose executor calls bulk.c has been written and checked for. */
#define WI_BULK_EXECUTOR_KNOWN (PG_VERSION_NUM < 200000)

/*
 * BGWORKER_INTERRUPTIBLE (19): a worker with this flag is ended by the
 * commands that need its database to themselves (DROP DATABASE, ALTER
 * DATABASE ... RENAME, CREATE DATABASE ... TEMPLATE), instead of making
 * them fail.  Earlier majors have no such flag: those commands refuse
 * while the worker is connected to the database.
 */
#if PG19_GE
#define WI_BGWORKER_INTERRUPTIBLE BGWORKER_INTERRUPTIBLE
#else
#define WI_BGWORKER_INTERRUPTIBLE 0
#endif

/*
 * CheckValidResultRel() (17: + List *mergeActions, commit 5f2e179bd31;
 * 18: + OnConflictAction before it; 19: + ModifyTable *mtnode).  An INSERT
 * without ON CONFLICT, MERGE or a plan node: the newest form takes
 * ONCONFLICT_NONE, NIL and NULL.
 */
#if PG17_LT
#define CheckValidResultRelCompat(rri, op) CheckValidResultRel((rri), (op))
#elif PG18_LT
#define CheckValidResultRelCompat(rri, op) CheckValidResultRel((rri), (op), NIL)
#elif PG19_LT
#define CheckValidResultRelCompat(rri, op) CheckValidResultRel((rri), (op), ONCONFLICT_NONE, NIL)
#else
#define CheckValidResultRelCompat(rri, op) \
	CheckValidResultRel((rri), (op), ONCONFLICT_NONE, NIL, NULL)
#endif

/*
 * ExecCheckPermissions() and RTEPermissionInfo (16, commit a61b1f74823):
 * the permissions an INSERT checks moved from the RangeTblEntry
 * (requiredPerms, insertedCols, checked by ExecCheckRTPerms) to a
 * RTEPermissionInfo of the query's rteperminfos list, which the entry
 * names by perminfoindex.  On 15 the entry is its own permission info,
 * so code written for 16 sets the same fields on it.
 * wi_rte_perminfo(rte, relid) gives the permission info of a range
 * table's only entry (in the files that include nodes/parsenodes.h).
 */
#if PG16_LT
typedef struct RangeTblEntry RTEPermissionInfo;
#define ExecCheckPermissions(rtable, perminfos, ereport_on_violation) \
	ExecCheckRTPerms((rtable), (ereport_on_violation))
#define wi_rte_perminfo(rte, relid) (rte)
#elif defined(PARSENODES_H)
#define wi_rte_perminfo(rte, relid) wi_rte_perminfo16((rte), (relid))
static inline RTEPermissionInfo *
wi_rte_perminfo16(RangeTblEntry *rte, Oid relid)
{
	RTEPermissionInfo *perminfo = makeNode(RTEPermissionInfo);

	perminfo->relid = relid;
	rte->perminfoindex = 1;
	return perminfo;
}
#endif

/*
 * ExecInitRangeTable() (16: + List *permInfos, commit a61b1f74823; 18: +
 * Bitmapset *unpruned_relids, the range table entries initial pruning
 * kept, commit d47cbf474).  The newest form's arguments; the older majors
 * drop what they do not take.
 */
#if PG16_LT
#define ExecInitRangeTableCompat(estate, rtable, perminfos, unpruned) \
	ExecInitRangeTable((estate), (rtable))
#elif PG18_LT
#define ExecInitRangeTableCompat(estate, rtable, perminfos, unpruned) \
	ExecInitRangeTable((estate), (rtable), (perminfos))
#else
#define ExecInitRangeTableCompat(estate, rtable, perminfos, unpruned) \
	ExecInitRangeTable((estate), (rtable), (perminfos), (unpruned))
#endif

/*
 * ExecInsertIndexTuples() (16: + bool onlySummarizing, commit 19d8e2308b;
 * 19: the booleans became a flags bitmask, EIIT_*, and the arguments were
 * reordered to (rri, estate, flags, slot, arbiterIndexes, specConflict)).
 * The index entries of a freshly inserted heap tuple: not an update, no
 * speculative insertion, every index.
 */
#if PG16_LT
#define ExecInsertIndexTuplesForInsert(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL)
#elif PG19_LT
#define ExecInsertIndexTuplesForInsert(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, false)
#else
#define ExecInsertIndexTuplesForInsert(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (estate), 0, (slot), NIL, NULL)
#endif

/*
 * Generated columns (18, commit 83ea6c54025: virtual generated columns,
 * TupleConstr.has_generated_virtual).  A direct writer computes neither
 * kind, so a table with either is not plain.
 */
#if PG18_LT
#define wi_has_generated_columns(constr) ((constr)->has_generated_stored)
#else
#define wi_has_generated_columns(constr) \
	((constr)->has_generated_stored || (constr)->has_generated_virtual)
#endif

/*
 * index_beginscan() (18: + IndexScanInstrumentation *instrument after the
 * snapshot, commit 0fbceae841; 19: + a trailing flags argument).  No
 * instrumentation, no flags.
 */
#if PG18_LT
#define index_beginscan_compat(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#elif PG19_LT
#define index_beginscan_compat(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define index_beginscan_compat(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys), 0)
#endif

/*
 * JSON parser semantic actions (16: json_struct_action and the others
 * return JsonParseErrorType, so that an action can stop the parse; the
 * change that let jsonpath's and SQL/JSON's callers report errors softly).  Ours never stop it: they are declared WiJsonAction and end with
 * WI_JSON_ACTION_DONE.
 */
#if PG16_LT
#define WiJsonAction void
#define WI_JSON_ACTION_DONE return
#else
#define WiJsonAction JsonParseErrorType
#define WI_JSON_ACTION_DONE return JSON_SUCCESS
#endif

/*
 * makeJsonLexContextCstringLen() (17: the lexer context comes first, NULL
 * allocating one, with freeJsonLexContext() freeing what it allocated; part
 * of the incremental JSON parser's groundwork).
 */
#if PG17_LT
#define makeJsonLexContextCstringLenCompat(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen((json), (len), (encoding), (need_escapes))
#else
#define makeJsonLexContextCstringLenCompat(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen(NULL, (json), (len), (encoding), (need_escapes))
#endif

/*
 * pg_b64_encode() / pg_b64_decode() (18: the binary side is uint8 *, as
 * the SCRAM and OAuth code passes it, and the results are pg_nodiscard).  wi_b64_bytes is the
 * binary side's element type; every caller uses the result.
 */
#if PG18_LT
typedef char wi_b64_bytes;
#else
typedef uint8 wi_b64_bytes;
#endif

/*
 * PG_MODULE_MAGIC_EXT() (18: the library's name and version in its magic
 * block, which pg_get_loaded_modules() reports).  Before 18, the plain
 * magic block.
 */
#if PG18_LT
#define PG_MODULE_MAGIC_EXT(...) PG_MODULE_MAGIC
#endif

/*
 * pushJsonbValue() (19, commit 0986e95161: it takes a JsonbInState *,
 * returns void, and leaves the finished value in state->result).  The
 * newest form: on the older majors, JsonbInState is declared here with the
 * two fields this code uses.
 */
#if PG19_LT
typedef struct JsonbInState
{
	struct JsonbParseState *parseState;
	struct JsonbValue *result;
} JsonbInState;
#define pushJsonbValueCompat(state, seq, jbval) \
	((state)->result = pushJsonbValue(&(state)->parseState, (seq), (jbval)))
#else
#define pushJsonbValueCompat(state, seq, jbval) pushJsonbValue((state), (seq), (jbval))
#endif

/*
 * ResultRelInfo.ri_ConstraintExprs (18: renamed ri_CheckConstraintExprs,
 * beside the NOT NULL checks of virtual generated columns).  The new name, on the older majors too.
 */
#if PG18_LT
#define ri_CheckConstraintExprs ri_ConstraintExprs
#endif

/*
 * The varlena macros (VARDATA, SET_VARSIZE, VARSIZE_ANY_EXHDR, ...) (16,
 * commit d952373a98: moved from postgres.h to varatt.h, which postgres.h no
 * longer includes).
 */
#if PG16_GE
#include "varatt.h"
#endif

/*
 * Not needed here, checked against each major's headers: pqsignal()'s
 * SIG_IGN (19) -- the worker installs handlers only, never SIG_IGN;
 * BackendId (17), the GUC hooks' header (16), MakeTupleTableSlot() and
 * table_beginscan() (19), Item, PointerIsValid and bits8 (19): not used.
 * Headers 19 no longer includes transitively are included where they are
 * used, on every major.
 */

#endif							/* WI_PG_COMPAT_H */
