/*
 * bulk.c
 *		Rows written into a table as COPY FROM writes them.
 *
 * An INSERT ... SELECT runs its machinery for every row: the executor's
 * per-row steps, one heap insertion and one WAL record each, and under ON
 * CONFLICT a pre-check, a speculative insertion lock and a confirmation
 * record per row.  For the rows of one intake batch that is a large share
 * of intake's time.  This writer takes the executor's own pieces that COPY
 * FROM uses (copyfrom.c): the result relation with its indexes, the
 * columns' defaults, ExecConstraints(), table_multi_insert() for the heap
 * (one WAL record per page) and ExecInsertIndexTuples() for every index.
 *
 * It writes only where that is all an INSERT would do.  A table with
 * triggers (foreign keys are triggers too), row security, generated
 * columns, partitions or a foreign table, or a read-only transaction,
 * makes wi_bulk_open() return NULL, and the caller runs its statement,
 * which does everything.  Privileges are checked as INSERT checks them.
 *
 * A unique index still refuses a key that another transaction holds: the
 * insertion waits for that transaction and raises a unique violation if it
 * committed.  A caller that must treat such a key as a duplicate probes
 * first (wi_bulk_key_exists) and runs the write in a subtransaction whose
 * failure falls back to its ON CONFLICT statement.
 *
 * The executor pieces differ between majors (RTEPermissionInfo from 16,
 * the arguments of ExecInitRangeTable(), CheckValidResultRel(),
 * ExecInsertIndexTuples() and index_beginscan(), virtual generated columns
 * from 18): pg_compat.h maps each.  Built against a major newer than those
 * it knows (WI_BULK_EXECUTOR_KNOWN), wi_bulk_open() always returns NULL,
 * saying so once in the log, and every caller runs its statement (the path
 * it already takes for a table with triggers), which is correct
 * everywhere, only slower.
 */
#include "postgres.h"

#include "nodes/parsenodes.h"

#include "bulk.h"
#include "pg_compat.h"

#if WI_BULK_EXECUTOR_KNOWN

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_relation.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

/* Rows kept before they are written; intake's batches are smaller. */
#define BULK_MAX_ROWS	1000

struct WiBulk
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	int			ncols;
	AttrNumber *attnums;		/* of cols[k] */
	struct Prepared *prep;		/* defaults, checks, index predicates */
	ExprState **defexprs;		/* prep->defexprs, compiled for this batch */
	TupleTableSlot **slots;
	int			nslots;			/* created */
	int			nused;			/* holding rows not yet written */
	CommandId	cid;

	/* wi_bulk_key_exists()'s scan, opened on its first call */
	Snapshot	keysnap;
	IndexScanDesc keyscan;
	TupleTableSlot *keyslot;
	ScanKeyData keys[INDEX_MAX_KEYS];
	int			nkeys;
};

/* Whether an INSERT into rel would run nothing but what this file does. */
static bool
plain_target(Relation rel)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;

	if (rel->rd_rel->relkind != RELKIND_RELATION)
		return false;
	if (rel->trigdesc != NULL)
		return false;
	if (constr != NULL && wi_has_generated_columns(constr))
		return false;
	if (check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED)
		return false;
	return true;
}

/*
 * What an INSERT reads back and plans for every statement, kept across
 * batches for each table this writer writes: the planned expressions of the
 * defaults of the columns not given, of the CHECK constraints and of the
 * predicates of partial indexes.  Each batch compiles them into its own
 * ExprStates, in its own executor state, as a statement does (some steps
 * keep what they build in the query's memory).  A relcache invalidation of
 * the table (any change of its columns, constraints or indexes sends one,
 * and it is taken in when the table is locked) marks its entry stale; the
 * next wi_bulk_open() plans it again.  An entry is freed only there, never
 * under a batch that uses it.
 */
typedef struct Prepared
{
	Oid			relid;
	bool		valid;
	MemoryContext cxt;
	int			ncols;
	AttrNumber *attnums;		/* the columns given, which decide the defaults */
	int			ndefaults;
	AttrNumber *defattnums;		/* columns that take a default */
	Expr	  **defexprs;		/* NULL: no default, the column is NULL */
	int			ncheck;
	Expr	  **checks;
	int			nindexes;
	Oid		   *indexoids;
	List	  **predicates;		/* NIL for an index without one */
	struct Prepared *next;
} Prepared;

static Prepared *prepared = NULL;
static bool prepared_callback = false;

static void
prepared_inval(Datum arg, Oid relid)
{
	for (Prepared *p = prepared; p != NULL; p = p->next)
		if (relid == InvalidOid || p->relid == relid)
			p->valid = false;
}

/* Whether p was built for what b writes now. */
static bool
prepared_fits(Prepared *p, WiBulk *b)
{
	TupleConstr *constr = RelationGetDescr(b->rel)->constr;

	if (!p->valid || p->ncols != b->ncols ||
		memcmp(p->attnums, b->attnums, sizeof(AttrNumber) * b->ncols) != 0 ||
		p->ncheck != (constr ? constr->num_check : 0) ||
		p->nindexes != b->rri->ri_NumIndices)
		return false;
	for (int i = 0; i < p->nindexes; i++)
		if (p->indexoids[i] != RelationGetRelid(b->rri->ri_IndexRelationDescs[i]))
			return false;
	return true;
}

static void
prepared_build(Prepared *p, WiBulk *b)
{
	Relation	rel = b->rel;
	TupleDesc	desc = RelationGetDescr(rel);
	TupleConstr *constr = desc->constr;
	MemoryContext old = MemoryContextSwitchTo(p->cxt);
	bool	   *given = palloc0(sizeof(bool) * (desc->natts + 1));

	p->ncols = b->ncols;
	p->attnums = palloc(sizeof(AttrNumber) * b->ncols);
	memcpy(p->attnums, b->attnums, sizeof(AttrNumber) * b->ncols);
	for (int k = 0; k < b->ncols; k++)
		given[b->attnums[k]] = true;

	/* the defaults of the columns not given, as COPY FROM evaluates them */
	p->defattnums = palloc(sizeof(AttrNumber) * desc->natts);
	p->defexprs = palloc(sizeof(Expr *) * desc->natts);
	p->ndefaults = 0;
	for (AttrNumber a = 1; a <= desc->natts; a++)
	{
		Expr	   *defexpr;

		if (TupleDescAttr(desc, a - 1)->attisdropped || given[a])
			continue;
		defexpr = (Expr *) build_column_default(rel, a);
		p->defattnums[p->ndefaults] = a;
		p->defexprs[p->ndefaults] = defexpr ? expression_planner(defexpr) : NULL;
		p->ndefaults++;
	}

	/* the checks, as ExecConstraints() would build them for a statement */
	p->ncheck = constr ? constr->num_check : 0;
	p->checks = palloc(sizeof(Expr *) * Max(p->ncheck, 1));
	for (int i = 0; i < p->ncheck; i++)
		p->checks[i] = expression_planner(stringToNode(constr->check[i].ccbin));

	/* partial indexes' predicates, as ExecInsertIndexTuples() would */
	p->nindexes = b->rri->ri_NumIndices;
	p->indexoids = palloc(sizeof(Oid) * Max(p->nindexes, 1));
	p->predicates = palloc0(sizeof(List *) * Max(p->nindexes, 1));
	for (int i = 0; i < p->nindexes; i++)
	{
		IndexInfo  *ii = b->rri->ri_IndexRelationInfo[i];

		p->indexoids[i] = RelationGetRelid(b->rri->ri_IndexRelationDescs[i]);
		if (ii->ii_Predicate != NIL)
			p->predicates[i] = (List *) expression_planner((Expr *) copyObject(ii->ii_Predicate));
	}
	pfree(given);
	MemoryContextSwitchTo(old);
	p->valid = true;
}

/* b's prepared parts: kept from an earlier batch, or built now. */
static void
prepare(WiBulk *b)
{
	Oid			relid = RelationGetRelid(b->rel);
	Prepared   *p;
	MemoryContext old;

	if (!prepared_callback)
	{
		CacheRegisterRelcacheCallback(prepared_inval, (Datum) 0);
		prepared_callback = true;
	}
	for (p = prepared; p != NULL; p = p->next)
		if (p->relid == relid)
			break;
	if (p == NULL)
	{
		p = MemoryContextAllocZero(CacheMemoryContext, sizeof(Prepared));
		p->relid = relid;
		p->next = prepared;
		prepared = p;
	}
	if (!prepared_fits(p, b))
	{
		if (p->cxt != NULL)
			MemoryContextDelete(p->cxt);
		p->cxt = AllocSetContextCreate(CacheMemoryContext, "webhook_inbox bulk writer",
									   ALLOCSET_SMALL_SIZES);
		prepared_build(p, b);
	}
	b->prep = p;

	/* this batch's ExprStates, in its executor state's memory */
	old = MemoryContextSwitchTo(b->estate->es_query_cxt);
	b->defexprs = palloc(sizeof(ExprState *) * Max(p->ndefaults, 1));
	for (int d = 0; d < p->ndefaults; d++)
		b->defexprs[d] = p->defexprs[d] ? ExecInitExpr(p->defexprs[d], NULL) : NULL;
	if (p->ncheck > 0)
	{
		b->rri->ri_CheckConstraintExprs = palloc(sizeof(ExprState *) * p->ncheck);
		for (int i = 0; i < p->ncheck; i++)
			b->rri->ri_CheckConstraintExprs[i] = ExecInitExpr(p->checks[i], NULL);
	}
	for (int i = 0; i < p->nindexes; i++)
		if (p->predicates[i] != NIL)
			b->rri->ri_IndexRelationInfo[i]->ii_PredicateState = ExecInitQual(p->predicates[i], NULL);
	MemoryContextSwitchTo(old);
}

WiBulk *
wi_bulk_open(const char *schema, const char *table, const WiBulkColumn *cols, int ncols)
{
	Oid			nsp = get_namespace_oid(schema, false);
	Oid			relid = get_relname_relid(table, nsp);
	Relation	rel;
	RangeTblEntry *rte;
	RTEPermissionInfo *perminfo;
	WiBulk	   *b;
	TupleDesc	desc;

	if (!OidIsValid(relid))
		return NULL;			/* the statement raises its own error */
	if (XactReadOnly || IsInParallelMode())
		return NULL;
	rel = table_open(relid, RowExclusiveLock);
	if (!plain_target(rel))
	{
		table_close(rel, NoLock);
		return NULL;
	}
	desc = RelationGetDescr(rel);

	b = palloc0(sizeof(WiBulk));
	b->rel = rel;
	b->ncols = ncols;
	b->attnums = palloc(sizeof(AttrNumber) * ncols);
	for (int k = 0; k < ncols; k++)
	{
		AttrNumber	a = attnameAttNum(rel, cols[k].name, false);
		Form_pg_attribute att;

		if (a <= 0)
		{
			/* the statement names the column in its own error */
			table_close(rel, NoLock);
			return NULL;
		}
		/* a changed type (or a domain, or a typmod) needs the statement's cast */
		att = TupleDescAttr(desc, a - 1);
		if (att->atttypid != cols[k].type || att->atttypmod != -1)
		{
			table_close(rel, NoLock);
			return NULL;
		}
		b->attnums[k] = a;
	}

	/* the privileges an INSERT of these columns needs */
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = relid;
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	perminfo = wi_rte_perminfo(rte, relid);
	perminfo->requiredPerms = ACL_INSERT;
	for (int k = 0; k < ncols; k++)
		perminfo->insertedCols = bms_add_member(perminfo->insertedCols,
												b->attnums[k] - FirstLowInvalidHeapAttributeNumber);
	ExecCheckPermissions(list_make1(rte), list_make1(perminfo), true);

	b->estate = CreateExecutorState();
	ExecInitRangeTableCompat(b->estate, list_make1(rte), list_make1(perminfo),
							 bms_make_singleton(1));
	b->rri = makeNode(ResultRelInfo);
	ExecInitResultRelation(b->estate, b->rri, 1);
	CheckValidResultRelCompat(b->rri, CMD_INSERT);
	ExecOpenIndices(b->rri, false);

	prepare(b);

	b->slots = palloc0(sizeof(TupleTableSlot *) * BULK_MAX_ROWS);
	b->cid = GetCurrentCommandId(true);
	return b;
}

void
wi_bulk_add(WiBulk *b, Datum *values, bool *nulls)
{
	TupleTableSlot *slot;
	ExprContext *econtext = GetPerTupleExprContext(b->estate);

	if (b->nused == BULK_MAX_ROWS)
		wi_bulk_flush(b);
	if (b->nused == b->nslots)
		b->slots[b->nslots++] = table_slot_create(b->rel, &b->estate->es_tupleTable);
	slot = b->slots[b->nused];
	ExecClearTuple(slot);
	/* the columns no default fills are NULL */
	memset(slot->tts_isnull, true, sizeof(bool) * slot->tts_tupleDescriptor->natts);
	for (int k = 0; k < b->ncols; k++)
	{
		slot->tts_values[b->attnums[k] - 1] = values[k];
		slot->tts_isnull[b->attnums[k] - 1] = nulls[k];
	}
	for (int d = 0; d < b->prep->ndefaults; d++)
	{
		AttrNumber	a = b->prep->defattnums[d];

		if (b->defexprs[d] == NULL)
			continue;
		slot->tts_values[a - 1] = ExecEvalExpr(b->defexprs[d], econtext,
											   &slot->tts_isnull[a - 1]);
	}
	ExecStoreVirtualTuple(slot);
	if (b->rel->rd_att->constr)
		ExecConstraints(b->rri, slot, b->estate);
	b->nused++;
}

void
wi_bulk_flush(WiBulk *b)
{
	if (b->nused == 0)
		return;
	table_multi_insert(b->rel, b->slots, b->nused, b->cid, 0, NULL);
	for (int i = 0; i < b->nused; i++)
	{
		if (b->rri->ri_NumIndices > 0)
			list_free(ExecInsertIndexTuplesForInsert(b->rri, b->slots[i], b->estate));
		ExecClearTuple(b->slots[i]);
	}
	ResetPerTupleExprContext(b->estate);
	b->nused = 0;
}

void
wi_bulk_close(WiBulk *b)
{
	wi_bulk_flush(b);
	if (b->keyscan != NULL)
	{
		index_endscan(b->keyscan);
		UnregisterSnapshot(b->keysnap);
	}
	ExecResetTupleTable(b->estate->es_tupleTable, false);
	ExecCloseResultRelations(b->estate);
	ExecCloseRangeTableRelations(b->estate);
	FreeExecutorState(b->estate);
	table_close(b->rel, NoLock);
	/* later statements of the transaction see the rows */
	CommandCounterIncrement();
	pfree(b);
}

/* Sets up the scan of the unique index named index, keyed on its columns. */
static void
key_scan_open(WiBulk *b, const char *index, int nkeys)
{
	Relation	irel = NULL;

	for (int i = 0; i < b->rri->ri_NumIndices; i++)
		if (strcmp(RelationGetRelationName(b->rri->ri_IndexRelationDescs[i]), index) == 0)
			irel = b->rri->ri_IndexRelationDescs[i];
	if (irel == NULL || !irel->rd_index->indisunique ||
		IndexRelationGetNumberOfKeyAttributes(irel) != nkeys ||
		irel->rd_rel->relam != BTREE_AM_OID)
		elog(ERROR, "webhook_inbox: \"%s\" is not a unique btree index of %d columns of \"%s\"",
			 index, nkeys, RelationGetRelationName(b->rel));
	for (int k = 0; k < nkeys; k++)
	{
		Oid			opfamily = irel->rd_opfamily[k];
		Oid			type = irel->rd_opcintype[k];
		Oid			eq = get_opfamily_member(opfamily, type, type, BTEqualStrategyNumber);

		if (irel->rd_index->indkey.values[k] != b->attnums[k] || !OidIsValid(eq))
			elog(ERROR, "webhook_inbox: index \"%s\" does not begin with the writer's columns", index);
		ScanKeyEntryInitialize(&b->keys[k], 0, k + 1, BTEqualStrategyNumber, InvalidOid,
							   irel->rd_indcollation[k], get_opcode(eq), (Datum) 0);
	}
	b->nkeys = nkeys;
	b->keyslot = table_slot_create(b->rel, &b->estate->es_tupleTable);
	/*
	 * Read committed sees what is committed now, as ON CONFLICT does; the
	 * other levels see their transaction's snapshot (a key committed after
	 * it then raises, and the statement reports the serialization failure).
	 */
	b->keysnap = RegisterSnapshot(IsolationUsesXactSnapshot() ? GetActiveSnapshot() :
								  GetLatestSnapshot());
	b->keyscan = index_beginscan_compat(b->rel, irel, b->keysnap, nkeys, 0);
}

bool
wi_bulk_key_exists(WiBulk *b, const char *index, Datum *keys, int nkeys)
{
	bool		found;

	if (b->keyscan == NULL)
		key_scan_open(b, index, nkeys);
	Assert(nkeys == b->nkeys);
	for (int k = 0; k < nkeys; k++)
		b->keys[k].sk_argument = keys[k];
	index_rescan(b->keyscan, b->keys, nkeys, NULL, 0);
	found = index_getnext_slot(b->keyscan, ForwardScanDirection, b->keyslot);
	ExecClearTuple(b->keyslot);
	return found;
}

#else							/* not WI_BULK_EXECUTOR_KNOWN */

/* No direct writer: the callers run their statements. */
WiBulk *
wi_bulk_open(const char *schema, const char *table, const WiBulkColumn *cols, int ncols)
{
	static bool said = false;

	if (!said)
	{
		said = true;
		ereport(LOG,
				(errmsg("webhook_inbox: no direct writer for PostgreSQL %d, writes run as statements",
						PG_VERSION_NUM / 10000)));
	}
	return NULL;
}

/* Never reached: no WiBulk is ever opened. */
void
wi_bulk_add(WiBulk *b, Datum *values, bool *nulls)
{
	elog(ERROR, "webhook_inbox: no direct writer in this build");
}

void
wi_bulk_flush(WiBulk *b)
{
	elog(ERROR, "webhook_inbox: no direct writer in this build");
}

void
wi_bulk_close(WiBulk *b)
{
	elog(ERROR, "webhook_inbox: no direct writer in this build");
}

bool
wi_bulk_key_exists(WiBulk *b, const char *index, Datum *keys, int nkeys)
{
	elog(ERROR, "webhook_inbox: no direct writer in this build");
	return false;
}

#endif							/* WI_BULK_EXECUTOR_KNOWN */
