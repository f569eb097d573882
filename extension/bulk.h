/*
 * bulk.h
 *		Rows written into a table the way COPY FROM writes them: many heap
 *		tuples at once, then their index entries, with the table's defaults
 *		and constraints, and none of a statement's per-row machinery.
 */
#ifndef WI_BULK_H
#define WI_BULK_H

#include "postgres.h"

#include "utils/relcache.h"

typedef struct WiBulk WiBulk;

/* A column the caller gives, with the type of the Datums it passes. */
typedef struct WiBulkColumn
{
	const char *name;
	Oid			type;
} WiBulkColumn;

/*
 * Opens schema.table for writing the columns cols[0..ncols-1] of rows, or
 * returns NULL when a plain INSERT would do something this writer does not
 * (triggers, row security, generated columns, a partitioned or foreign
 * table, a read-only transaction, a column whose type is not exactly the
 * one given and would need a cast): the caller then runs its statement.
 * Raises, as INSERT does, when the current user may not insert.
 */
extern WiBulk *wi_bulk_open(const char *schema, const char *table,
							const WiBulkColumn *cols, int ncols);

/*
 * Adds one row: values[k] and nulls[k] are cols[k]; the other columns take
 * their defaults.  Checks the row's NOT NULL and CHECK constraints (and
 * raises, as INSERT does).  The values must stay valid until the flush.
 */
extern void wi_bulk_add(WiBulk *b, Datum *values, bool *nulls);

/* Writes the rows added so far and their index entries. */
extern void wi_bulk_flush(WiBulk *b);

/* Flushes, then closes everything wi_bulk_open() opened. */
extern void wi_bulk_close(WiBulk *b);

/*
 * Whether a row with these key values is visible in the unique index of
 * the table whose key columns are, in order, the writer's first nkeys
 * columns.  index must be that index's name.
 */
extern bool wi_bulk_key_exists(WiBulk *b, const char *index, Datum *keys, int nkeys);

#endif							/* WI_BULK_H */
