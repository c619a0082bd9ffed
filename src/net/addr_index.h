/* An index by address over a fixed table of slots (the transport's
 * outbound connections and the peers' connections to us): finds the slot
 * holding an address in O(1), where a scan compared the address with
 * every slot's on every send (256 and 512 slots). Chained hashing over the
 * slot numbers; the table's rows keep their addresses, the index only
 * their hashes and chains. Not thread-safe (as the transport). */
#ifndef STARLING_NET_ADDR_INDEX_H
#define STARLING_NET_ADDR_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#define SL_ADDR_INDEX_NONE SIZE_MAX /* no slot */

typedef struct {
    uint32_t *heads;  /* bucket -> 1 + first slot of its chain, 0 empty */
    uint32_t *next;   /* slot -> 1 + next slot of its chain, 0 last */
    uint64_t *hashes; /* slot -> hash of its address, while indexed */
    uint8_t *in;      /* slot -> 1 while indexed */
    size_t mask;      /* buckets - 1 (a power of two, at least 2 x slots) */
    size_t slots;     /* slots in the table */
} sl_addr_index_t;

/* The address of slot `slot` of `table` (a callback: the index does not
 * know the table's row type). */
typedef const char *(*sl_addr_index_key_fn)(const void *table, size_t slot);

sl_err sl_addr_index_init(sl_addr_index_t *ix, size_t slots);
void sl_addr_index_fini(sl_addr_index_t *ix);
/* Indexes slot `slot` under `addr` (it must not be indexed already). */
void sl_addr_index_add(sl_addr_index_t *ix, size_t slot, const char *addr);
/* Drops slot `slot` from the index; nothing when it is not indexed. */
void sl_addr_index_del(sl_addr_index_t *ix, size_t slot);
/* The indexed slot whose address (key(table, slot)) is `addr`, or
 * SL_ADDR_INDEX_NONE. */
size_t sl_addr_index_find(const sl_addr_index_t *ix, const char *addr, sl_addr_index_key_fn key,
                          const void *table);

#endif
