/* Blobs, internal: the test-only fault switch of the placement planner, so
 * the S6 checker can be seen to fire (tests/blob_test.c; INVARIANTS.md).
 * Never set outside tests; not part of the embedder's API (STYLE.md). */
#ifndef STARLING_BLOB_BLOB_TEST_H
#define STARLING_BLOB_BLOB_TEST_H

/* 1 = plans never re-replicate; 0 = none (process-wide). */
void sl_blob_set_bug(int bug);

#endif
