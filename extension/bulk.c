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
 */
#include "postgres.h"

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
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "bulk.h"

/* Rows kept before they are written; intake's batches are smaller. */
#define BULK_MAX_ROWS	1000

struct WiBulk
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	int			ncols;
	AttrNumber *attnums;		/* of cols[k] */
	int			ndefaults;
	AttrNumber *defattnums;		/* columns that take a default */
	ExprState **defexprs;
	bool	   *defnull;		/* no default: NULL */
	TupleTableSlot **slots;
	int			nslots;			/* created */
	int			nused;			/* holding rows not yet written */
	CommandId	cid;

	/* wi_bulk_key_exists()'s scan, opened on its first call */
	Snapshot	keysnap;
	Relation	keyindex;
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
	if (constr != NULL && constr->has_generated_stored)
		return false;
	if (check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED)
		return false;
	return true;
}

WiBulk *
wi_bulk_open(const char *schema, const char *table, const WiBulkColumn *cols, int ncols)
{
	Oid			nsp = get_namespace_oid(schema, false);
	Oid			relid = get_relname_relid(table, nsp);
	Relation	rel;
	RangeTblEntry *rte;
	WiBulk	   *b;
	TupleDesc	desc;
	bool	   *given;

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
	given = palloc0(sizeof(bool) * (desc->natts + 1));
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
		given[a] = true;
	}

	/* the privileges an INSERT of these columns needs */
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = relid;
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	rte->requiredPerms = ACL_INSERT;
	for (int k = 0; k < ncols; k++)
		rte->insertedCols = bms_add_member(rte->insertedCols,
										   b->attnums[k] - FirstLowInvalidHeapAttributeNumber);
	ExecCheckRTPerms(list_make1(rte), true);

	b->estate = CreateExecutorState();
	ExecInitRangeTable(b->estate, list_make1(rte));
	b->rri = makeNode(ResultRelInfo);
	ExecInitResultRelation(b->estate, b->rri, 1);
	CheckValidResultRel(b->rri, CMD_INSERT);
	ExecOpenIndices(b->rri, false);

	/* the defaults of the columns not given, as COPY FROM evaluates them */
	b->defattnums = palloc(sizeof(AttrNumber) * desc->natts);
	b->defexprs = palloc(sizeof(ExprState *) * desc->natts);
	b->defnull = palloc(sizeof(bool) * desc->natts);
	for (AttrNumber a = 1; a <= desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a - 1);
		Expr	   *defexpr;

		if (att->attisdropped || given[a])
			continue;
		defexpr = (Expr *) build_column_default(rel, a);
		b->defattnums[b->ndefaults] = a;
		b->defnull[b->ndefaults] = defexpr == NULL;
		b->defexprs[b->ndefaults] = defexpr ?
			ExecInitExpr(expression_planner(defexpr), NULL) : NULL;
		b->ndefaults++;
	}
	pfree(given);

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
	for (int d = 0; d < b->ndefaults; d++)
	{
		AttrNumber	a = b->defattnums[d];

		if (b->defnull[d])
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
			list_free(ExecInsertIndexTuples(b->rri, b->slots[i], b->estate,
											false, false, NULL, NIL));
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
	b->keyindex = irel;
	b->nkeys = nkeys;
	b->keyslot = table_slot_create(b->rel, &b->estate->es_tupleTable);
	/*
	 * Read committed sees what is committed now, as ON CONFLICT does; the
	 * other levels see their transaction's snapshot (a key committed after
	 * it then raises, and the statement reports the serialization failure).
	 */
	b->keysnap = RegisterSnapshot(IsolationUsesXactSnapshot() ? GetActiveSnapshot() :
								  GetLatestSnapshot());
	b->keyscan = index_beginscan(b->rel, irel, b->keysnap, nkeys, 0);
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
