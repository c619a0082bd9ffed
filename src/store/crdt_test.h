/* CRDT values, internal: the test-only fault switch, so the law tests can
 * be seen to fire (tests/crdt_test.c; INVARIANTS.md). Never set outside
 * tests; not part of the embedder's API (STYLE.md). */
#ifndef STARLING_STORE_CRDT_TEST_H
#define STARLING_STORE_CRDT_TEST_H

/* Plants a bug in every value (process-wide). 1: LWW ties ignore the
 * replica id. 0: none. */
void sl_crdt_set_bug(int bug);

#endif
